import Foundation
import Herald
import HeraldClient
import HeraldPostgres
import Synchronization
import Testing

extension IntegrationTests {
    /// Faults injected one at a time under a steady writer; what a socket
    /// subscriber received is then compared with the rows that committed.
    @Suite
    struct FaultInjectionTests {
        func committedRows(_ database: TestDatabase) throws -> Set<Int64> {
            Set(try database.execute("SELECT id FROM fault_row").rows.compactMap { $0[0].flatMap { Int64($0) } })
        }

        /// Waits until every committed row has arrived, then returns the deliveries.
        func settle(_ subscriber: ResumingSubscriber, _ database: TestDatabase, _ phase: String) async throws -> [Int64: [String]] {
            let committed = try committedRows(database)
            try await waitFor(seconds: 60) {
                Set(subscriber.deliveries.keys).isSuperset(of: committed)
            } failure: {
                let missing = committed.subtracting(subscriber.deliveries.keys)
                let journal = (try? database.execute("""
                    SELECT j.id, j.txid::text FROM pgherald.journal j
                     WHERE (j.event::json->'new'->>'id')::bigint = ANY($1::bigint[])
                    """, parameters: ["{" + missing.sorted().prefix(10).map(String.init).joined(separator: ",") + "}"]).rows) ?? []
                return "\(phase): \(missing.count) of \(committed.count) committed rows never arrived, such as \(missing.sorted().prefix(10)); "
                    + "journal (event id, txid): \(journal); the subscriber reconnected after \(subscriber.reconnects) events, resets \(subscriber.resets)"
            }
            try await Task.sleep(for: .milliseconds(500))
            let deliveries = subscriber.deliveries
            let extra = Set(deliveries.keys).subtracting(committed)
            #expect(extra.isEmpty, "\(phase): rows that never committed arrived: \(extra.sorted().prefix(10))")
            return deliveries
        }

        /// Waits until the event log holds every committed row, then returns its lines' event ids by row.
        func settledEventLog(_ path: String, _ database: TestDatabase, _ phase: String) async throws -> [Int64: [String]] {
            let committed = try committedRows(database)
            func logged() -> [Int64: [String]] {
                let lines = ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n")
                var rows: [Int64: [String]] = [:]
                for line in lines {
                    guard let event = try? Event(payload: String(line)), event.table.name == "fault_row",
                          case .number(let number)? = event.row?["id"], let id = number.int64Value else { continue }
                    rows[id, default: []].append(event.id)
                }
                return rows
            }
            try await waitFor(seconds: 60) {
                Set(logged().keys).isSuperset(of: committed)
            } failure: {
                "\(phase): \(committed.subtracting(logged().keys).count) of \(committed.count) committed rows are not in the event log"
            }
            let rows = logged()
            let extra = Set(rows.keys).subtracting(committed)
            #expect(extra.isEmpty, "\(phase): rows that never committed are in the event log: \(extra.sorted().prefix(10))")
            return rows
        }

        @Test(.enabled(if: PostgresAdmin.canRestartCluster))
        func nothingMissingNothingExtraUnderFaults() async throws {
            let database = try TestDatabase.create(enrolment: false, install: false, on: PostgresAdmin.restartable)
            try database.execute(SteadyWriter.schema)
            try Installer.install(on: database.connect())
            // The durable event log must come through the same faults with nothing lost.
            let eventLog = FileManager.default.temporaryDirectory.appending(path: "pgherald-faults-\(UUID().uuidString.prefix(8)).jsonl").path
            defer { try? FileManager.default.removeItem(atPath: eventLog) }
            var daemon = try await SocketDaemon(database: database, arguments: ["--event-log", eventLog])
            let subscriber = ResumingSubscriber(socketPath: daemon.socketPath, table: "fault_row")
            try await daemon.waitForSubscribers(1, kind: "sse")
            let writer = SteadyWriter(database: database)

            // Phase one: the daemon stays up, so no duplicate is allowed.
            try await Task.sleep(for: .seconds(1))
            try database.execute("""
                SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE application_name = 'pgherald' AND datname = current_database()
                """)
            try await Task.sleep(for: .seconds(1))
            try await PostgresAdmin.restartCluster()
            try await daemon.waitUntilHealthy(within: 60)
            try await Task.sleep(for: .seconds(1))
            await writer.pause()
            let beforeKills = try await settle(subscriber, database, "terminate_backend and pg_ctl restart")
            let duplicated = beforeKills.filter { $0.value.count > 1 }
            #expect(duplicated.isEmpty, "duplicates without a daemon kill: \(duplicated.prefix(5))")
            let loggedBeforeKills = try await settledEventLog(eventLog, database, "terminate_backend and pg_ctl restart")
            #expect(loggedBeforeKills.filter { $0.value.count > 1 }.isEmpty, "the event log repeated lines without a daemon kill")
            writer.resume()

            // Phase two: SIGKILL, with a long transaction open across it.
            try await Task.sleep(for: .seconds(1))
            let spanning = try database.connect()
            try spanning.execute("BEGIN")
            try spanning.execute("INSERT INTO fault_row (writer, payload) VALUES (-2, 'spans a kill')")
            daemon.process.signal(SIGKILL)
            _ = try await daemon.process.finish()
            try await Task.sleep(for: .milliseconds(500))
            daemon = try await SocketDaemon(database: database, socketPath: daemon.socketPath, arguments: ["--event-log", eventLog])
            try spanning.execute("COMMIT")
            try await Task.sleep(for: .seconds(1))
            daemon.process.signal(SIGKILL)
            _ = try await daemon.process.finish()
            daemon = try await SocketDaemon(database: database, socketPath: daemon.socketPath, arguments: ["--event-log", eventLog])
            try await Task.sleep(for: .seconds(1))
            await writer.stop()

            let deliveries = try await settle(subscriber, database, "daemon SIGKILL")
            for (row, eventIDs) in deliveries where Set(eventIDs).count > 1 {
                Issue.record("row \(row) arrived as different events \(eventIDs)")
            }
            #expect(subscriber.resets.isEmpty)
            let logged = try await settledEventLog(eventLog, database, "daemon SIGKILL")
            for (row, eventIDs) in logged where Set(eventIDs).count > 1 {
                Issue.record("row \(row) was logged as different events \(eventIDs)")
            }
            let committed = try committedRows(database)
            #expect(committed.count > 500, "the writer committed too little to mean anything (\(committed.count))")
            let spanned = try database.execute("SELECT id FROM fault_row WHERE writer = -2")
            #expect(spanned.rows.count == 1)
            print("fault injection: \(committed.count) rows committed of \(writer.attempts) attempted; "
                + "\(deliveries.values.map(\.count).reduce(0, +) - deliveries.count) repeated after SIGKILL")
        }
    }
}
