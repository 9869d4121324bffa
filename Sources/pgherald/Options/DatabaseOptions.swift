public import ArgumentParser
import Foundation
import Herald
public import HeraldPostgres

struct DatabaseOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "libpq connection string or postgresql:// URI.",
            discussion: "Empty (the default) uses libpq's defaults: PGHOST, PGPORT, PGDATABASE, PGUSER, .pgpass. Keep passwords out of it, since every local user can read a command line with ps: put them in ~/.pgpass or a file named by PGPASSFILE.",
            valueName: "conninfo"
        )
    )
    var db: String?

    func connectionString() throws -> ConnectionString {
        try ConnectionString(db ?? "")
    }

    /// What to say when `--db` itself carries a password; nil when it does not.
    func passwordWarning(for connection: ConnectionString) -> String? {
        guard connection.containsPassword else { return nil }
        return "--db contains a password, which every local user can read with ps; put it in ~/.pgpass or a file named by PGPASSFILE instead"
    }

    /// The connection string, warning on stderr when it carries a password: for commands that do not log.
    func connectionStringWarningOnStderr() throws -> ConnectionString {
        let connection = try connectionString()
        if let warning = passwordWarning(for: connection) {
            FileHandle.standardError.write(Data("pgherald: warning: \(warning)\n".utf8))
        }
        return connection
    }
}

extension Durability: ExpressibleByArgument {}
extension Installer.Triggers: ExpressibleByArgument {}
