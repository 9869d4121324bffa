import Foundation
import Herald
import HeraldPostgres
import Testing

/// The PgBouncers scripts/test starts in front of the default cluster (scripts/pg-pooler).
private let testPoolers = (
    transaction: ProcessInfo.processInfo.environment["PGHERALD_TEST_POOLER_TRANSACTION"],
    session: ProcessInfo.processInfo.environment["PGHERALD_TEST_POOLER_SESSION"]
)

extension IntegrationTests {
    /// `serve` through a real PgBouncer: a transaction pooler, where LISTEN
    /// would hear nothing, is refused with the way out; a session pooler
    /// works; and the listener can take its own conninfo while the other
    /// queries go through the pool.
    @Suite(.enabled(if: testPoolers.transaction != nil, "needs PGHERALD_TEST_POOLER_* (scripts/test)"))
    struct PoolerTests {
        static let transactionPooler = testPoolers.transaction
        static let sessionPooler = testPoolers.session

        @Test func serveRefusesATransactionPoolerAndSaysHowToConnect() async throws {
            let database = try TestDatabase.create()
            let pooled = "\(try #require(Self.transactionPooler)) dbname=\(database.name)"
            let started = ContinuousClock.now
            let run = try await DaemonProcess(["serve", "--db", pooled, "--no-socket"]).finish(within: 20)
            #expect(run.status != 0)
            #expect(ContinuousClock.now - started < .seconds(15))
            #expect(run.stderr.contains("connection pooler in transaction or statement mode"), "\(run.stderr)")
            #expect(run.stderr.contains("--listen-db") && run.stderr.contains("session-mode pool"), "\(run.stderr)")
            // Refused before its name was claimed: a daemon connected directly starts under the same name.
            let direct = try await RunningListener(database: database)
            try database.execute("INSERT INTO course (short_code, name) VALUES ('DIRECT', 'Straight to the server')")
            #expect(try await direct.inbox.take(1).first?.new?["short_code"] == .string("DIRECT"))
            try await direct.stop()
        }

        @Test func checkConfigWithConnectReportsThePoolerAsServeWould() async throws {
            let database = try TestDatabase.create()
            let transaction = "\(try #require(Self.transactionPooler)) dbname=\(database.name)"
            let refused = try await DaemonProcess(["check-config", "--connect", "/dev/null"], environment: ["PGHERALD_DATABASE": transaction]).finish()
            #expect(refused.status == 78)
            #expect(refused.stderr.contains("connection pooler in transaction or statement mode"), "\(refused.stderr)")
            // The listener's own conninfo is what counts.
            let own = try await DaemonProcess(["check-config", "--connect", "/dev/null"], environment: [
                "PGHERALD_DATABASE": transaction, "PGHERALD_LISTEN_DATABASE": database.connInfo,
            ]).finish()
            #expect(own.status == 0, "\(own.stderr)")
            #expect(own.stdout.contains("# listener: connects straight to PostgreSQL"), "\(own.stdout)")
            let session = "\(try #require(Self.sessionPooler)) dbname=\(database.name)"
            let kept = try await DaemonProcess(["check-config", "--connect", "/dev/null"], environment: ["PGHERALD_DATABASE": session]).finish()
            #expect(kept.status == 0, "\(kept.stderr)")
            #expect(kept.stdout.contains("session-mode pooler"), "\(kept.stdout)")
        }

        @Test func aSessionPoolerKeepsTheListenAndDelivers() async throws {
            let database = try TestDatabase.create()
            let pooled = TestDatabase(name: database.name, connInfo: "\(try #require(Self.sessionPooler)) dbname=\(database.name)")
            let daemon = try await RunningListener(database: pooled)
            try database.execute("INSERT INTO course (short_code, name) VALUES ('SESSION', 'Through a session pool')")
            #expect(try await daemon.inbox.take(1).first?.new?["short_code"] == .string("SESSION"))
            try await daemon.stop()
        }

        @Test func theListenerTakesItsOwnConninfoWhileQueriesGoThroughThePool() async throws {
            let database = try TestDatabase.create()
            let pooled = "\(try #require(Self.transactionPooler)) dbname=\(database.name)"
            let daemon = try DaemonProcess([
                "serve", "--db", pooled, "--listen-db", database.connInfo, "--no-socket", "--stdout", "json",
            ])
            let writer = Task {
                for attempt in 1...100 {
                    _ = try? database.execute("UPDATE course SET name = $1 WHERE id = 1", parameters: ["Pooled \(attempt)"])
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            let line = try await daemon.readLine { $0.contains(#""op":"UPDATE""#) }
            writer.cancel()
            #expect(try Event(payload: line).table == TableName(name: "course"))
            daemon.signal(SIGTERM)
            let run = try await daemon.finish()
            #expect(run.status == 0, "\(run.stderr)")
        }
    }
}
