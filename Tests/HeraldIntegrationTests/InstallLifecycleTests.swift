import Foundation
import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// What happens to an install over its life: a dump restored elsewhere keeps
    /// publishing, uninstall leaves nothing behind, each install has its own
    /// channel, and two-phase commit is refused rather than left unpublished.
    @Suite(.enabled(if: !TestCluster.matrix.isEmpty, "needs PGHERALD_TEST_MATRIX (scripts/test)"))
    struct InstallLifecycleTests {
        @Test(arguments: TestCluster.matrix)
        func aDumpRestoresAWorkingInstallAndUninstallLeavesNothing(_ cluster: TestCluster) async throws {
            let bin = try #require(cluster.binDirectory, "no bindir beside \(cluster.connInfo)")
            let original = try TestDatabase.create(install: false, on: cluster)
            let admin = try original.connect()
            try Installer.install(on: admin, triggers: .native)
            try admin.execute("INSERT INTO course (short_code, name) VALUES ('DUMP', 'Before the dump')")
            let channel = try Journal.notificationChannel(on: admin)

            let restored = try TestDatabase.create(enrolment: false, install: false, on: cluster)
            let dump = FileManager.default.temporaryDirectory.appending(path: "pgherald-\(original.name).dump").path
            defer { try? FileManager.default.removeItem(atPath: dump) }
            try run("\(bin)/pg_dump", ["-Fc", "-f", dump, "-d", original.connInfo])
            try run("\(bin)/pg_restore", ["--exit-on-error", "-d", restored.connInfo, dump])
            let copy = try restored.connect()
            #expect(try Journal.notificationChannel(on: copy) == channel, "the restored install keeps its channel")
            #expect(try Installer.usesNativeTriggers(on: copy))
            #expect(try Installer.watchedTables(on: copy) == Installer.watchedTables(on: admin))
            let daemon = try await RunningListener(database: restored)
            try copy.execute("INSERT INTO course (short_code, name) VALUES ('RESTORED', 'After the restore')")
            let events = try await daemon.inbox.take(1)
            #expect(events.first?.new?["short_code"] == .string("RESTORED"))
            try await daemon.stop()

            try Installer.uninstall(on: admin)
            let leftovers = try admin.execute("""
                SELECT (SELECT count(*) FROM pg_namespace WHERE nspname = 'pgherald'),
                       (SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'pgherald%'),
                       (SELECT count(*) FROM pg_event_trigger WHERE evtname LIKE 'pgherald%'),
                       (SELECT count(*) FROM pg_proc WHERE proname LIKE '%pgherald%' OR probin LIKE '%pgherald%'
                                                       OR prosrc LIKE '%pgherald.%'),
                       (SELECT count(*) FROM pg_class WHERE relname LIKE 'pgherald%'),
                       (SELECT count(*) FROM course WHERE short_code = 'DUMP')
                """)
            #expect(leftovers.rows == [["0", "0", "0", "0", "0", "1"]])
            try admin.execute("INSERT INTO course (short_code, name) VALUES ('AFTER', 'Writes go on')")
        }

        @Test func eachInstallChoosesItsOwnChannelAndKeepsIt() throws {
            let first = try TestDatabase.create()
            let second = try TestDatabase.create()
            let channel = try #require(try Journal.notificationChannel(on: first.connect()))
            #expect(channel.wholeMatch(of: /pgherald_[0-9a-f]{32}/) != nil)
            #expect(try Journal.notificationChannel(on: second.connect()) != channel)
            let connection = try first.connect()
            try Installer.install(on: connection, durability: .notifyOnly)
            #expect(try Journal.notificationChannel(on: connection) == channel, "a reinstall keeps the channel")
            try Installer.uninstall(on: connection)
            try Installer.install(on: connection)
            #expect(try Journal.notificationChannel(on: connection) != channel, "a new install chooses anew")
        }

        /// PostgreSQL refuses PREPARE TRANSACTION after NOTIFY. Notify-only
        /// triggers notify in every write, and durable plpgsql ones while a
        /// daemon is parked (the doorbell): such a prepared transaction is
        /// refused and publishes nothing, instead of committing later with no
        /// one told. While the daemons read the journal, a durable write
        /// prepares, and its events reach the daemon once it commits.
        /// Unwatched tables prepare as before. (With the native library a
        /// durable write prepares while a daemon is parked too: DoorbellTests.)
        @Test(arguments: [Durability.durable, .notifyOnly])
        func twoPhaseCommitOnAWatchedTableIsRefusedOnlyWhereItWouldNotify(_ durability: Durability) async throws {
            let database = try TestDatabase.create(install: false)
            let connection = try database.connect()
            try connection.execute("CREATE SCHEMA elsewhere; CREATE TABLE elsewhere.ledger (id int PRIMARY KEY)")
            try Installer.install(on: connection, durability: durability, triggers: .plpgsql)
            let gid = "pgherald-\(database.name)"
            if durability == .durable {
                // A daemon that has run once and stopped: it catches up what commits while it is down.
                try await RunningListener(database: database).stop()
                try connection.execute("BEGIN; INSERT INTO course (short_code, name) VALUES ('2PC', 'Prepared'); PREPARE TRANSACTION '\(gid)'")
                try connection.execute("COMMIT PREPARED '\(gid)'")
                let daemon = try await RunningListener(database: database)
                #expect(try await daemon.inbox.take(1).first?.new?["short_code"] == .string("2PC"))
                try await daemon.stop()
                // A parked daemon's doorbell, as pgherald.park() sets it.
                try connection.execute("SELECT setval('pgherald.doorbell', 1)")
            }
            var refusal = ""
            do {
                try connection.execute("BEGIN; INSERT INTO course (short_code, name) VALUES ('2PC2', 'Prepared'); PREPARE TRANSACTION '\(gid)'")
            } catch {
                refusal = error.message
            }
            _ = try? connection.execute("ROLLBACK")
            #expect(refusal.contains("cannot PREPARE a transaction that has executed LISTEN, UNLISTEN, or NOTIFY"), "\(refusal)")
            let written = try connection.execute("SELECT count(*) FROM course WHERE short_code = '2PC2'")
            #expect(written.rows == [["0"]])
            if durability == .durable {
                #expect(try connection.execute("SELECT count(*) FROM pgherald.journal WHERE event LIKE '%2PC2%'").rows == [["0"]])
            }
            try connection.execute("BEGIN; INSERT INTO elsewhere.ledger VALUES (1); PREPARE TRANSACTION '\(gid)'")
            try connection.execute("COMMIT PREPARED '\(gid)'")
            #expect(try connection.execute("SELECT count(*) FROM elsewhere.ledger").rows == [["1"]])
        }

        private func run(_ executable: String, _ arguments: [String]) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
            let errors = Pipe()
            process.standardError = errors
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            let message = errors.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            try #require(process.terminationStatus == 0, "\(executable): \(String(decoding: message, as: UTF8.self))")
        }
    }
}
