import Foundation
import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// Durable mode: the journal, catch-up after gaps, exact restarts, retention and notify-only mode.
    @Suite
    struct DurabilityTests {
        /// A daemon printing events as JSON, once it is listening.
        func serve(_ database: TestDatabase, socketPath: String? = nil) async throws -> (DaemonProcess, StdoutEvents) {
            let daemon = try await SocketDaemon(database: database, socketPath: socketPath, arguments: ["--stdout", "json"])
            return (daemon.process, StdoutEvents(daemon.process))
        }

        func insertCourse(_ database: TestDatabase, _ code: String) throws {
            try database.execute("INSERT INTO course (short_code, name) VALUES ($1, 'course')", parameters: [code])
        }

        func codes(_ events: [Event]) -> [String] {
            events.compactMap { $0.row?["short_code"]?.stringValue }
        }

        @Test(arguments: TestCluster.matrix)
        func aLateCommitWithALowerIDAndWritesWhileDownArriveAfterSIGKILL(_ cluster: TestCluster) async throws {
            let database = try TestDatabase.create(on: cluster)
            let (first, firstEvents) = try await serve(database)
            try insertCourse(database, "READY")
            _ = try await firstEvents.wait(for: 1)

            // A takes its event id first but commits last, after the daemon is gone.
            let early = try database.connect()
            try early.execute("BEGIN")
            try early.execute("INSERT INTO course (short_code, name) VALUES ('EARLY', 'lower id, later commit')")
            try insertCourse(database, "LIVE")
            _ = try await firstEvents.wait(for: 2)
            first.signal(SIGKILL)
            _ = try await first.finish()
            try early.execute("COMMIT")
            let inOneTransaction = try database.connect()
            try inOneTransaction.execute("BEGIN")
            try inOneTransaction.execute("INSERT INTO course (short_code, name) VALUES ('T1', 'first statement')")
            try inOneTransaction.execute("UPDATE course SET name = 'second statement' WHERE short_code = 'T1'")
            try inOneTransaction.execute("DELETE FROM course WHERE short_code = 'T1'")
            try inOneTransaction.execute("COMMIT")
            let rolledBack = try database.connect()
            try rolledBack.execute("BEGIN")
            try rolledBack.execute("INSERT INTO course (short_code, name) VALUES ('GONE', 'rolled back')")
            try rolledBack.execute("ROLLBACK")

            let (second, secondEvents) = try await serve(database)
            try insertCourse(database, "AFTER")
            try await waitFor { codes(secondEvents.all).contains("AFTER") }
            try await Task.sleep(for: .milliseconds(300))
            let delivered = secondEvents.all
            let fresh = delivered.filter { !["READY", "LIVE"].contains($0.row?["short_code"]?.stringValue ?? "") }
            #expect(codes(fresh) == ["EARLY", "T1", "T1", "T1", "AFTER"], "\(codes(delivered))")
            #expect(fresh.filter { $0.row?["short_code"] == .string("T1") }.map(\.operation) == [.insert, .update, .delete])
            #expect(!codes(delivered).contains("GONE"))
            // Whatever the first daemon had delivered may come again after a SIGKILL, with the same id.
            let repeated = delivered.filter { ["READY", "LIVE"].contains($0.row?["short_code"]?.stringValue ?? "") }
            for event in repeated {
                #expect(firstEvents.all.contains { $0.id == event.id })
            }
            second.signal(SIGTERM)
        }

        @Test func aGracefulRestartNeitherRepeatsNorSkips() async throws {
            let database = try TestDatabase.create()
            let (first, firstEvents) = try await serve(database)
            try insertCourse(database, "ONE")
            _ = try await firstEvents.wait(for: 1)
            first.signal(SIGTERM)
            let stopped = try await first.finish()
            #expect(stopped.status == 0, "\(stopped.stderr)")
            try insertCourse(database, "TWO")
            try insertCourse(database, "THREE")

            let (second, secondEvents) = try await serve(database)
            defer { second.signal(SIGTERM) }
            _ = try await secondEvents.wait(for: 2)
            try insertCourse(database, "FOUR")
            _ = try await secondEvents.wait(for: 3)
            try await Task.sleep(for: .milliseconds(300))
            #expect(codes(secondEvents.all) == ["TWO", "THREE", "FOUR"])
        }

        @Test func twoDaemonsShareADatabaseUnderTheirOwnNames() async throws {
            let database = try TestDatabase.create()
            let first = try await SocketDaemon(database: database, arguments: ["--name", "first", "--stdout", "json"])
            let second = try await SocketDaemon(database: database, arguments: ["--name", "second", "--stdout", "json"])
            let firstEvents = StdoutEvents(first.process)
            let secondEvents = StdoutEvents(second.process)
            try insertCourse(database, "SHARED")
            _ = try await firstEvents.wait(for: 1)
            _ = try await secondEvents.wait(for: 1)
            // Each records its own progress, and neither mistakes the other's ticks for events.
            try await waitFor {
                let names = try database.execute("SELECT DISTINCT daemon FROM pgherald.checkpoint ORDER BY 1")
                return names.rows == [["first"], ["second"]]
            }
            try await Task.sleep(for: .milliseconds(1500))
            let stopped = [try await first.stop(), try await second.stop()]
            for result in stopped {
                #expect(result.status == 0)
                #expect(!result.stderr.contains("not a pgherald event"), "\(result.stderr)")
            }
        }

        @Test func reconnectsAfterTerminateBackendWithoutGapOrDuplicate() async throws {
            let database = try TestDatabase.create()
            let daemon = try await RunningListener(database: database)
            let writer = Task {
                for index in 0..<300 {
                    try database.execute("INSERT INTO student (first_name, last_name) VALUES ($1, 'writer')", parameters: ["s\(index)"])
                    try await Task.sleep(for: .milliseconds(3))
                }
            }
            for _ in 0..<3 {
                try await Task.sleep(for: .milliseconds(200))
                try database.execute("""
                    SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                     WHERE application_name = 'pgherald' AND datname = current_database()
                    """)
            }
            try await writer.value
            let events = try await daemon.inbox.take(300, within: 30)
            #expect(Set(events.map(\.id)).count == 300)
            #expect(events.compactMap { $0.new?["first_name"]?.stringValue } == (0..<300).map { "s\($0)" }, "commit order")
            try await Task.sleep(for: .milliseconds(500))
            #expect(daemon.inbox.count == 0, "nothing more")
            try await daemon.stop()
        }

        @Test func retentionPrunesDeliveredEventsAndStatsShowTheJournal() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database, arguments: ["--retention", "1s", "--prune-interval", "1s"])
            try database.execute("INSERT INTO course (short_code, name) SELECT 'C' || g, 'old' FROM generate_series(1, 2500) g")
            try await waitFor(seconds: 20) {
                try await daemon.statistics().journal?.pruned ?? 0 >= 2500
            } failure: { "the journal was not pruned" }
            let remaining = try database.execute("SELECT count(*) FROM pgherald.journal")
            #expect(remaining.rows == [["0"]])
            // Emptied whole: no row was deleted, so vacuum has nothing to do.
            try await Task.sleep(for: .seconds(1.5))
            let deleted = try database.execute("""
                SELECT sum(n_tup_del + n_tup_upd + n_dead_tup) FROM pg_stat_user_tables WHERE schemaname = 'pgherald' AND relname ~ '^journal_[0-9]+$'
                """)
            #expect(deleted.rows == [["0"]])
            let statistics = try await daemon.statistics()
            #expect(statistics.durability == "durable")
            #expect(statistics.journal?.retentionSeconds == 1)
            #expect((statistics.journal?.bytes ?? 0) > 0)
            let status = try await DaemonProcess(["status", "--socket", daemon.socketPath]).finish()
            #expect(status.stdout.contains("durability:  durable"))
            #expect(status.stdout.contains("journal:"))
        }

        @Test func notifyOnlyModeSkipsTheJournalAndAMismatchIsRefused() async throws {
            let database = try TestDatabase.create(durability: .notifyOnly)
            let refused = try await DaemonProcess(["serve", "--db", database.connInfo, "--no-socket", "--durability", "durable"]).finish()
            #expect(refused.status != 0)
            #expect(refused.stderr.contains("pgherald install --durability durable"), "\(refused.stderr)")

            let daemon = try await SocketDaemon(database: database)
            try insertCourse(database, "NOTIFY")
            try await waitFor { try await daemon.statistics().changeCount == 1 }
            let statistics = try await daemon.statistics()
            #expect(statistics.durability == "notify-only")
            #expect(statistics.journal == nil)
            let journal = try database.execute("SELECT count(*) FROM pgherald.journal")
            #expect(journal.rows == [["0"]])
        }

        @Test func installSwitchesDurabilityAndKeepsItOnUpgrade() async throws {
            let database = try TestDatabase.create(install: false)
            let switched = try await DaemonProcess(["install", "--db", database.connInfo, "--durability", "notify-only"]).finish()
            #expect(switched.status == 0, "\(switched.stderr)")
            #expect(switched.stdout.contains("installed, notify-only"))
            let again = try await DaemonProcess(["install", "--db", database.connInfo]).finish()
            #expect(again.stdout.contains("installed, notify-only"), "an upgrade keeps the choice")
            let trigger = try database.execute("""
                SELECT regexp_replace(p.proname, '_native$', '') FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
                 WHERE t.tgrelid = 'course'::regclass AND t.tgname = 'pgherald_insert'
                """)
            #expect(trigger.rows == [["publish_statement"]])
            _ = try await DaemonProcess(["install", "--db", database.connInfo, "--durability", "durable"]).finish()
            let durable = try database.execute("""
                SELECT regexp_replace(p.proname, '_native$', '') FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
                 WHERE t.tgrelid = 'course'::regclass AND t.tgname = 'pgherald_insert'
                """)
            #expect(durable.rows == [["publish_statement_durable"]])
        }
    }
}
