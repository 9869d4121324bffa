import Foundation
import Herald
import HeraldPostgres
import Testing

/// One server of the version matrix: scripts/test starts a throwaway cluster
/// of every supported PostgreSQL major, with the native triggers installed in
/// each, and names them in `PGHERALD_TEST_MATRIX` (`MAJOR=conninfo;...`).
struct TestCluster: Sendable, Hashable, CustomTestStringConvertible {
    let major: Int
    let connInfo: String

    var testDescription: String { "PostgreSQL \(major)" }

    /// Every cluster of the matrix, oldest major first; empty outside scripts/test.
    static let matrix = parse(ProcessInfo.processInfo.environment["PGHERALD_TEST_MATRIX"] ?? "")

    /// Clusters named as `MAJOR=conninfo;...`, oldest major first.
    static func parse(_ text: String) -> [TestCluster] {
        text.split(separator: ";").compactMap { entry in
            guard let equals = entry.firstIndex(of: "="), let major = Int(entry[..<equals]) else { return nil }
            return TestCluster(major: major, connInfo: String(entry[entry.index(after: equals)...]))
        }.sorted { $0.major < $1.major }
    }

    /// The server's bin directory (pg_dump, pg_restore of its own major), which
    /// scripts/pg-cluster records beside the socket the conninfo names.
    var binDirectory: String? {
        guard let host = connInfo.firstMatch(of: /host=(\S+)/)?.1 else { return nil }
        return (try? String(contentsOfFile: "\(host)/bindir", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Where matrix tests append what they counted, for scripts/test's table.
    static let reportPath = ProcessInfo.processInfo.environment["PGHERALD_TEST_MATRIX_REPORT"]
}

/// One cell of the matrix: a major, a kind of trigger and a durability.
struct TriggerCell: Sendable, Hashable, CustomTestStringConvertible {
    let cluster: TestCluster
    let triggers: Installer.Triggers
    let durability: Durability

    var testDescription: String { "PostgreSQL \(cluster.major), \(triggers.rawValue), \(durability.rawValue)" }

    /// Every major × {native, plpgsql} × {durable, notify-only}.
    static let all: [TriggerCell] = TestCluster.matrix.flatMap { cluster in
        [Installer.Triggers.native, .plpgsql].flatMap { triggers in
            [Durability.durable, .notifyOnly].map { TriggerCell(cluster: cluster, triggers: triggers, durability: $0) }
        }
    }

    /// Appends `passed` of `total` for this cell under `suite` to the report.
    func report(_ suite: String, passed: Int, total: Int) {
        guard let path = TestCluster.reportPath else { return }
        let line = "\(suite)\t\(cluster.major)\t\(triggers.rawValue)\t\(durability.rawValue)\t\(passed)\t\(total)\n"
        // One write with O_APPEND: lines from parallel cases never interleave.
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT, 0o644)
        guard descriptor >= 0 else { return }
        _ = line.utf8CString.withUnsafeBufferPointer { write(descriptor, $0.baseAddress, $0.count - 1) }
        close(descriptor)
    }
}
