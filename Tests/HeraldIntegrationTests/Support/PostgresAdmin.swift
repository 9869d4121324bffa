import Foundation
import HeraldPostgres
import Testing

/// Statements run on the cluster's `postgres` database.
enum PostgresAdmin {
    @discardableResult
    static func execute(_ sql: String) throws -> LibpqConnection.QueryResult {
        let connection = try LibpqConnection.connect(ConnectionString(TestDatabase.clusterConnInfo ?? ""))
        return try connection.execute(sql)
    }

    /// The cluster that tests may restart, and its conninfo: scripts/test starts one of its own
    /// (`PGHERALD_TEST_RESTARTABLE`, its directory, and `PGHERALD_TEST_RESTARTABLE_CLUSTER`,
    /// `MAJOR=conninfo`), so that a restart cuts no other test's sessions while
    /// suites run in parallel; without it, the default cluster.
    static let restartableDirectory = ProcessInfo.processInfo.environment["PGHERALD_TEST_RESTARTABLE"]
        ?? ProcessInfo.processInfo.environment["PGHERALD_TEST_CLUSTER"]
    static let restartable = TestCluster.parse(ProcessInfo.processInfo.environment["PGHERALD_TEST_RESTARTABLE_CLUSTER"] ?? "").first

    /// Whether scripts/test told the tests where a cluster is, so they may restart it.
    static var canRestartCluster: Bool { restartableDirectory != nil }

    /// `pg_ctl restart -m fast` of the restartable cluster through scripts/pg-cluster: every session
    /// on it is cut. Databases that a test restarts come from `TestDatabase.create(on: PostgresAdmin.restartable)`.
    static func restartCluster() async throws {
        let cluster = try #require(restartableDirectory, "run through scripts/test")
        let script = TestDatabase.repositoryRoot.appending(path: "scripts/pg-cluster").path
        // system() on a thread of its own: Foundation's Process does not reap this
        // child reliably here, and a blocking wait must not hold a cooperative thread.
        let status = await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: system("'\(script)' restart '\(cluster)' >/dev/null")) }.start()
        }
        try #require(status == 0, "pg-cluster restart failed with \(status)")
    }

    /// Ends the server sessions of `database` whose application_name is `application`; returns how many.
    @discardableResult
    static func terminateSessions(of application: String, in database: TestDatabase) throws -> Int {
        let result = try database.execute("""
            SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE application_name = '\(application)' AND datname = current_database()
            """)
        return Int(result.rows.first?[0] ?? "0") ?? 0
    }
}
