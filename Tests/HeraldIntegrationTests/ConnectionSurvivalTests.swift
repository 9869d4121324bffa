import Foundation
import Herald
import HeraldPostgres
import Logging
import Testing

extension IntegrationTests {
    /// Every connection the daemon holds answers its next query after the
    /// server cut it: journal reader, catalog and maintenance here; the
    /// listener in ReconnectTests and FaultInjectionTests.
    @Suite(.enabled(if: PostgresAdmin.canRestartCluster, "needs PGHERALD_TEST_CLUSTER (scripts/test)"))
    struct ConnectionSurvivalTests {
        enum Fault: String, CaseIterable, CustomTestStringConvertible {
            case terminateBackend, serverRestart
            var testDescription: String { rawValue }
        }

        let logger = Logger(label: "test")

        func inject(_ fault: Fault, into application: String, of database: TestDatabase) async throws {
            switch fault {
            case .terminateBackend:
                #expect(try PostgresAdmin.terminateSessions(of: application, in: database) == 1, "no idle \(application) session to cut")
            case .serverRestart:
                try await PostgresAdmin.restartCluster()
            }
        }

        @Test(arguments: Fault.allCases)
        func aJournalResumeAfterTheCutReplaysInsteadOfResetting(_ fault: Fault) async throws {
            let database = try TestDatabase.create(on: PostgresAdmin.restartable)
            // No in-memory history: every resume reads the journal.
            let daemon = try await SocketDaemon(database: database, arguments: ["--history", "0"])
            let live = try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson&table=course")
            for code in ["A", "B", "C"] {
                try database.execute("INSERT INTO course (short_code, name) VALUES ($1, 'course')", parameters: [code])
            }
            try await live.waitForLines(3)
            let first = try #require(live.lines.first.flatMap { try? Event(payload: String($0)) })
            // A first resume opens the journal connection, which the fault then cuts.
            let warm = try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson&table=course&since=\(first.id)")
            try await warm.waitForLines(2)

            try await inject(fault, into: "pgherald-journal", of: daemon.database)
            try await daemon.waitUntilHealthy(within: 60)
            let resumed = try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson&table=course&since=\(first.id)")
            let text = try await resumed.text { $0.split(separator: "\n").count >= 2 }
            #expect(!text.contains("reset"), "\(text)")
            let codes = resumed.lines.compactMap { try? Event(payload: String($0)) }.compactMap { $0.row?["short_code"]?.stringValue }
            #expect(codes == ["B", "C"])
        }

        @Test(arguments: Fault.allCases)
        func theCatalogFindsANewTableAfterTheCut(_ fault: Fault) async throws {
            let database = try TestDatabase.create(on: PostgresAdmin.restartable)
            let catalog = SchemaCatalog(connection: try ConnectionString(database.connInfo), minimumRefreshInterval: .zero, logger: logger)
            #expect(try await catalog.validate(EventFilter(tables: [TableName(name: "course")])) == nil)

            try await inject(fault, into: "pgherald-catalog", of: database)
            try database.execute("CREATE TABLE created_after_the_cut (id int PRIMARY KEY)")
            #expect(try await catalog.validate(EventFilter(tables: [TableName(name: "created_after_the_cut")])) == nil)
        }

        @Test(arguments: Fault.allCases)
        func maintenanceTurnsAndEmptiesTheJournalFromItsFirstRunAfterTheCut(_ fault: Fault) async throws {
            let database = try TestDatabase.create(on: PostgresAdmin.restartable)
            let connection = try ConnectionString(database.connInfo)
            let listener = PostgresListener(configuration: .init(connection: connection, name: "pruner"), broker: Broker(), logger: logger)
            let maintenance = JournalMaintenance(
                configuration: .init(retention: .milliseconds(1)), connection: connection, daemon: "pruner", listener: listener, logger: logger
            )
            func writeDeliveredRows() async throws {
                try database.execute("INSERT INTO course (short_code, name) SELECT 'P' || n, 'p' FROM generate_series(1, 5) AS n")
                let writer = try database.connect()
                try Journal.saveCheckpoint(of: "pruner", try Journal.currentSnapshot(on: writer), on: writer)
                try await Task.sleep(for: .milliseconds(20))
            }
            // The retention is a millisecond: each run turns the journal, and the next empties the part it left.
            func currentPart() throws -> String? { try database.execute("SELECT last_value FROM pgherald.journal_current").scalar ?? nil }
            let first = try currentPart()
            try await writeDeliveredRows()
            #expect(await maintenance.runOnce() == 0, "the first run turns the journal to its other part")
            #expect(try currentPart() != first)
            try await Task.sleep(for: .milliseconds(20))
            #expect(await maintenance.runOnce() == 5, "the next empties the part it left")

            try await inject(fault, into: "pgherald-maintenance", of: database)
            try database.execute("DELETE FROM course WHERE short_code LIKE 'P%'")
            try await writeDeliveredRows()
            let written = try currentPart()
            #expect(await maintenance.runOnce() == 0)
            #expect(try currentPart() != written, "the first run after the cut turns the journal")
            try await Task.sleep(for: .milliseconds(20))
            #expect(await maintenance.runOnce() == 10, "the deletes and the new inserts")
        }
    }
}
