import ArgumentParser
import HeraldPostgres

struct Uninstall: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove the triggers and the pgherald schema; user tables and data are untouched."
    )

    @OptionGroup var database: DatabaseOptions

    func run() throws {
        let connection = try LibpqConnection.connect(database.connectionStringWarningOnStderr())
        try Installer.uninstall(on: connection)
        print("pgherald publisher removed (\(connection.endpointDescription))")
    }
}
