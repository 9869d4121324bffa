import Foundation
import Herald
import HeraldPostgres
import Testing

/// A fresh database in the throwaway cluster that scripts/test starts.
///
/// Each test gets its own database, so tests run in parallel without seeing
/// each other's notifications (NOTIFY is scoped to one database).
struct TestDatabase {
    /// Conninfo of the cluster's `postgres` database, from scripts/test.
    static let clusterConnInfo = ProcessInfo.processInfo.environment["PGHERALD_TEST_CONNINFO"]
    static var isAvailable: Bool { clusterConnInfo != nil }
    /// Whether scripts/test installed the native triggers into the cluster's server.
    static let hasNativeTriggers = ProcessInfo.processInfo.environment["PGHERALD_TEST_NATIVE"] == "1"
    static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    let name: String
    let connInfo: String

    /// Creates a database, loads the enrolment example and installs the publisher.
    /// - Parameter cluster: a cluster of the version matrix; default: the one the whole suite runs on.
    static func create(
        enrolment: Bool = true, install: Bool = true, durability: Durability? = nil, on cluster: TestCluster? = nil
    ) throws -> TestDatabase {
        let cluster = try #require(cluster?.connInfo ?? clusterConnInfo, "PGHERALD_TEST_CONNINFO is not set; run scripts/test")
        let name = "herald_\(UInt32.random(in: 0...UInt32.max))"
        let admin: LibpqConnection
        do {
            admin = try LibpqConnection.connect(ConnectionString(cluster))
        } catch {
            guard error.code == .timedOut else { throw error }
            // Seen twice in CI right after ServiceTests' test that locks the checkpoint table,
            // never in a rerun. The cluster is the tests' tool here, not what they test: say
            // what it was doing, and give it once more, three times as long.
            let diagnostics = ClusterDiagnostics.describe()
            withKnownIssue("the test cluster did not answer a new connection within 10 s", isIntermittent: true) {
                Issue.record("\(diagnostics)")
            }
            admin = try LibpqConnection.connect(ConnectionString(cluster), timeout: .seconds(30))
        }
        try admin.execute("CREATE DATABASE \(name)")
        let database = TestDatabase(name: name, connInfo: "\(cluster) dbname=\(name)")
        let connection = try database.connect()
        if enrolment {
            try connection.execute(String(contentsOf: repositoryRoot.appending(path: "sql/examples/enrolment.sql"), encoding: .utf8))
        }
        if install { try Installer.install(on: connection, durability: durability) }
        return database
    }

    func connect() throws -> LibpqConnection {
        try LibpqConnection.connect(ConnectionString(connInfo))
    }

    /// Runs statements on a new connection.
    @discardableResult
    func execute(_ sql: String, parameters: [String?] = []) throws -> LibpqConnection.QueryResult {
        try connect().execute(sql, parameters: parameters)
    }
}
