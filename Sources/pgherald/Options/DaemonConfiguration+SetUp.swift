import Foundation
import HeraldConfiguration
import HeraldSettings

extension DaemonConfiguration {
    /// The configuration file in use when it names no database and nothing
    /// else does: a file that has not been set up yet, as a packaged one is.
    func fileNamingNoDatabase(_ sources: ConfigurationSources) -> String? {
        guard !databaseIsNamed, let file = sources.file, FileManager.default.fileExists(atPath: file) else { return nil }
        return file
    }

    static func notSetUp(_ file: String) -> String {
        "database: \(file) names no database, and neither PGHERALD_DATABASE, --db nor a libpq variable (PGHOST, PGDATABASE, PGSERVICE) does: "
            + "set database: in it (a libpq conninfo or URI, or \"\" for libpq's defaults)"
    }
}
