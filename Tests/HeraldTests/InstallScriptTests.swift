import Foundation
import HeraldPostgres
import Testing

/// `install` applies the parts of `sql/install/` joined in order, and
/// `sql/install.sql`, the file psql users apply, is exactly that.
@Suite struct InstallScriptTests {
    static let sql = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appending(path: "sql")

    static func partFiles() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: sql.appending(path: "install").path)
            .filter { $0.hasPrefix("part") && $0.hasSuffix(".sql") }.sorted()
    }

    @Test func theBuildEmbedsEveryPartInOrder() throws {
        #expect(Installer.installParts.map(\.file) == (try Self.partFiles()))
        for part in Installer.installParts {
            let onDisk = try Data(contentsOf: Self.sql.appending(path: "install/\(part.file)"))
            #expect(Array(onDisk) == part.sql, "\(part.file) differs from what the build embedded: rebuild")
        }
    }

    @Test func installSQLIsThePartsJoined() throws {
        let shipped = try String(contentsOf: Self.sql.appending(path: "install.sql"), encoding: .utf8)
        #expect(shipped == Installer.installScript, "sql/install.sql is out of date: run scripts/install-sql")
    }

    /// The refusal of a newer publisher compares with a number of its own, which must be this script's version().
    @Test func theDowngradeCheckNamesThisScriptsVersion() throws {
        let script = Installer.installScript
        let version = try #require(script.firstMatch(of: /RETURNS int\s+LANGUAGE sql IMMUTABLE AS \$\$ SELECT (\d+) \$\$/)?.output.1)
        let checked = try #require(script.firstMatch(of: /IF installed > (\d+) THEN/)?.output.1)
        let named = try #require(script.firstMatch(of: /newer than this install script \(version (\d+)\)/)?.output.1)
        #expect(checked == version)
        #expect(named == version)
    }

    @Test func everyPartEndsAStatement() {
        for part in Installer.installParts {
            let text = String(decoding: part.sql, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(text.hasSuffix(";"), "\(part.file) ends inside a statement")
        }
    }
}
