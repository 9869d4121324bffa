import Foundation
import Herald
import HeraldPostgres
import Synchronization
import Testing

extension IntegrationTests {
    /// Durable mode notifies only to wake a parked daemon (the doorbell): a
    /// daemon that reads the journal costs writers no NOTIFY, and no event
    /// waits for a ring that never comes. On every major, with both kinds of trigger.
    @Suite
    struct DoorbellTests {
        static let cells = TriggerCell.all.filter { $0.durability == .durable }

        @Test(arguments: cells)
        func whileTheDaemonReadsTheJournalCommitsSendNoNotification(_ cell: TriggerCell) async throws {
            let database = try TestDatabase.create(install: false, on: cell.cluster)
            try Installer.install(on: database.connect(), durability: .durable, triggers: cell.triggers)
            let daemon = try await RunningListener(database: database, backstopInterval: .seconds(600))
            let eavesdropper = try Eavesdropper(database: database)
            try await waitUntilParked(database)

            // A parked daemon wakes for a single row, which rings.
            let writer = try database.connect()
            try writer.execute("INSERT INTO course (short_code, name) VALUES ('ONE', 'One')")
            let one = try await daemon.inbox.take(1, within: 5)
            #expect(one.first?.new?["short_code"] == .string("ONE"))
            #expect(eavesdropper.notifications(within: .seconds(2), wanted: 1) == 1, "the parked daemon's doorbell rang once")
            try await waitUntilParked(database)

            // Commits from several writers at once wake it to read the journal; from then on they commit without ringing.
            let writers = 4
            let woke = Atomic<Bool>(false)
            let written = Mutex<[Int]>(Array(repeating: 0, count: writers))
            let started = ContinuousClock.now
            let runs = (0..<writers).map { writer in
                Thread.run {
                    do {
                        let connection = try database.connect()
                        var row = 0
                        var sinceWaking = 0
                        // Bounded: a daemon that never wakes stops the run after 2,000 commits per writer.
                        while row < 2_000, sinceWaking < 100 {
                            row += 1
                            try connection.execute("INSERT INTO course (short_code, name) VALUES ($1, 'Run')", parameters: ["R\(writer)-\(row)"])
                            if !daemon.listener.isParked { woke.store(true, ordering: .relaxed) }
                            if woke.load(ordering: .relaxed) { sinceWaking += 1 }
                        }
                        written.withLock { $0[writer] = row }
                    } catch {
                        Issue.record("writer \(writer) failed: \(error)")
                    }
                }
            }
            for run in runs { await run.value }
            let writing = ContinuousClock.now - started
            let perWriter = written.withLock { $0 }
            let rows = perWriter.reduce(0, +)
            let run = try await daemon.inbox.take(rows, within: 30)
            for writer in 0..<writers {
                let codes = run.compactMap { $0.new?["short_code"]?.stringValue }.filter { $0.hasPrefix("R\(writer)-") }
                #expect(codes == (0..<perWriter[writer]).map { "R\(writer)-\($0 + 1)" }, "writer \(writer): each once, in commit order")
            }
            let rang = eavesdropper.notifications(within: .milliseconds(300))
            let wokeDuringRun = woke.load(ordering: .relaxed)
            // Waking takes 32 rings within 20 ms (1,600/s); a machine too busy to commit
            // twice that fast may rightly leave the daemon parked, which is recorded, not failed.
            let perSecond = Double(rows) / (Double(writing.components.seconds) + Double(writing.components.attoseconds) / 1e18)
            withKnownIssue("\(rows) commits at \(Int(perSecond))/s, too slow to be sure of waking the daemon", isIntermittent: true) {
                #expect(wokeDuringRun, "\(rows) commits at \(Int(perSecond))/s never woke the parked daemon")
            } when: { perSecond < 3_200 }
            if wokeDuringRun {
                #expect(rang < rows, "\(rang) of \(rows) commits notified: reading, the daemon needs no doorbell")
            }
            #expect(rang >= 1, "the first commits of the run rang the parked daemon's doorbell")
            #expect(daemon.listener.backstopEvents == 0)
            try await daemon.stop()
            #expect(try parkedDaemons(database) == 0, "a stopped daemon leaves no doorbell ringing")
        }

        /// Writers that looked at the doorbell just before the daemon parked
        /// commit without ringing; the daemon must find them anyway, promptly
        /// and not through the backstop. Pauses on the writer's side (before
        /// the write, before the commit, a snapshot taken early in REPEATABLE
        /// READ) and on the daemon's (holding the lock it parks and unparks
        /// under) are interleaved at random with idle gaps, which let it park,
        /// and runs of commits, which wake it.
        @Test(arguments: cells)
        func noEventWaitsForADoorbellThatNeverRings(_ cell: TriggerCell) async throws {
            let database = try TestDatabase.create(install: false, on: cell.cluster)
            try Installer.install(on: database.connect(), durability: .durable, triggers: cell.triggers)
            // No tick sweeps while it runs: only the doorbell and the unrung sweeps may find an event.
            let daemon = try await RunningListener(database: database, backstopInterval: .seconds(600), checkpointInterval: .seconds(600))
            let seed = UInt64.random(in: 0...UInt64(UInt32.max))
            let written = Atomic<Int>(0)
            let late = Mutex<String?>(nil)
            let stop = Atomic<Bool>(false)
            let pausing = Thread.run {
                guard let pauser = try? database.connect() else {
                    Issue.record("the pauser cannot connect")
                    return
                }
                var random = SeededRandom(seed: seed ^ 0x5EED)
                while !stop.load(ordering: .relaxed) {
                    _ = try? pauser.execute("SELECT pg_advisory_lock(hashtext('pgherald.doorbell'))")
                    pause(random.next(upTo: 15))
                    _ = try? pauser.execute("SELECT pg_advisory_unlock(hashtext('pgherald.doorbell'))")
                    pause(random.next(upTo: 30))
                }
            }
            let writing = Thread.run {
                var random = SeededRandom(seed: seed)
                var row = 0
                do {
                    let writer = try database.connect()
                    func insert() throws {
                        row += 1
                        try writer.execute("INSERT INTO course (short_code, name) VALUES ($1, 'Race')", parameters: ["W\(row)"])
                    }
                    for round in 0..<60 {
                        // Everything so far arrives promptly; the unrung sweeps are at most 100 ms apart.
                        let due = ContinuousClock.now + .milliseconds(500)
                        while daemon.inbox.count < row, ContinuousClock.now < due { pause(5) }
                        if daemon.inbox.count < row {
                            late.withLock { $0 = "round \(round): \(row - daemon.inbox.count) event(s) not delivered within 500 ms" }
                            break
                        }
                        switch random.next(upTo: 4) {
                        case 0:
                            try writer.execute(random.next(upTo: 2) == 0 ? "BEGIN" : "BEGIN ISOLATION LEVEL REPEATABLE READ")
                            try writer.execute("SELECT 1")
                            pause(random.next(upTo: 15))
                            try insert()
                            pause(random.next(upTo: 25))
                            try writer.execute("COMMIT")
                        case 1:
                            for _ in 0..<(5 + random.next(upTo: 40)) { try insert() }
                        case 2:
                            pause(random.next(upTo: 60))
                        default:
                            try insert()
                        }
                    }
                } catch {
                    Issue.record("the writer failed: \(error)")
                }
                written.store(row, ordering: .relaxed)
            }
            await writing.value
            stop.store(true, ordering: .relaxed)
            await pausing.value
            let rows = written.load(ordering: .relaxed)
            #expect(late.withLock { $0 } == nil, "seed \(seed): an event waited for a doorbell that never rang")
            try #require(rows > 0, "seed \(seed) wrote nothing")
            // Far inside the 600 s backstop: the unrung sweeps find them, at most 100 ms apart.
            let events = try await daemon.inbox.take(rows, within: 10)
            let ids: Set<String> = Set(events.map(\.id))
            #expect(ids.count == rows, "seed \(seed): each event once")
            let codes: Set<String> = Set(events.map { $0.new?["short_code"]?.stringValue ?? "" })
            let expected: Set<String> = Set((1...rows).map { "W\($0)" })
            #expect(codes == expected, "seed \(seed)")
            #expect(daemon.listener.backstopEvents == 0, "seed \(seed)")
            try await Task.sleep(for: .milliseconds(200))
            #expect(daemon.inbox.count == 0, "seed \(seed): nothing twice")
            try await daemon.stop()
        }

        /// The backstop: an event whose notification never came reaches the
        /// daemon within the backstop interval, and is counted.
        /// With the native library the doorbell rings at pre-commit, for every statement shape in
        /// the transaction, in order, and not for a savepoint rolled back. A transaction prepared
        /// instead notifies no one, so it prepares while the daemon is parked, and its events
        /// arrive from the journal once it commits. plpgsql rings from the trigger, after which
        /// PostgreSQL refuses PREPARE TRANSACTION.
        @Test(arguments: cells)
        func aParkedDaemonsDoorbellRingsAtCommitSoTransactionsPrepareWithTheNativeLibrary(_ cell: TriggerCell) async throws {
            let database = try TestDatabase.create(install: false, on: cell.cluster)
            try Installer.install(on: database.connect(), durability: .durable, triggers: cell.triggers)
            let daemon = try await RunningListener(database: database, backstopInterval: .milliseconds(500))
            let eavesdropper = try Eavesdropper(database: database)
            try await waitUntilParked(database)
            let writer = try applicationWriter(database, privileges: "SELECT, INSERT, UPDATE")

            // Single rows (the native path), a multi-row statement (plpgsql's), and a savepoint rolled back.
            try writer.execute("""
                BEGIN;
                INSERT INTO course (short_code, name) VALUES ('FIRST', 'One row');
                INSERT INTO course (short_code, name) SELECT 'MANY' || g, 'Many rows' FROM generate_series(1, 3) AS g;
                SAVEPOINT undone;
                INSERT INTO course (short_code, name) VALUES ('GONE', 'Rolled back');
                ROLLBACK TO SAVEPOINT undone;
                UPDATE course SET name = 'Renamed' WHERE short_code = 'FIRST';
                COMMIT
                """)
            #expect(eavesdropper.notifications(within: .seconds(5), wanted: 1) >= 1, "the parked daemon's doorbell did not ring")
            let events = try await daemon.inbox.take(5, within: 10)
            #expect(events.map { $0.new?["short_code"]?.stringValue ?? "" } == ["FIRST", "MANY1", "MANY2", "MANY3", "FIRST"])
            #expect(events.map { UInt64($0.id) ?? 0 } == events.map { UInt64($0.id) ?? 0 }.sorted(), "in the order they were written")
            try await Task.sleep(for: .milliseconds(300))
            #expect(daemon.inbox.count == 0, "an event of the rolled back savepoint arrived")

            try await waitUntilParked(database)
            let gid = "pgherald-\(database.name)"
            var refusal: String?
            do {
                try writer.execute("""
                    BEGIN;
                    INSERT INTO course (short_code, name) VALUES ('PREPARED', 'One row');
                    INSERT INTO course (short_code, name) SELECT 'PREPARED' || g, 'Many rows' FROM generate_series(1, 2) AS g;
                    PREPARE TRANSACTION '\(gid)'
                    """)
            } catch {
                refusal = error.message
                _ = try? writer.execute("ROLLBACK")
            }
            if cell.triggers == .native {
                #expect(refusal == nil, "\(refusal ?? "")")
                try writer.execute("COMMIT PREPARED '\(gid)'")
                let prepared = try await daemon.inbox.take(3, within: 10)
                #expect(prepared.map { $0.new?["short_code"]?.stringValue ?? "" } == ["PREPARED", "PREPARED1", "PREPARED2"])
            } else {
                #expect(refusal?.contains("cannot PREPARE a transaction that has executed LISTEN, UNLISTEN, or NOTIFY") == true, "\(refusal ?? "prepared")")
                #expect(try writer.execute("SELECT count(*) FROM course WHERE short_code LIKE 'PREPARED%'").rows == [["0"]])
            }
            try await daemon.stop()
        }

        /// A writer that reads the doorbell while a daemon is parking either
        /// rings, or is running in the snapshot of the daemon's closing sweep,
        /// which then sweeps until it ends. A snapshot lists as running only
        /// the ids below its xmax, the newest finished id plus one, so a writer
        /// whose id came after park()'s own and that read the doorbell before
        /// park() changed it would be in neither. Here park() is held on the
        /// daemon's row, after taking its transaction id, while an application
        /// role writes; the write commits once park() has.
        @Test(arguments: cells)
        func aWriterThatReadsTheDoorbellWhileTheDaemonParksRingsOrIsRunningInTheClosingSnapshot(_ cell: TriggerCell) async throws {
            let database = try TestDatabase.create(install: false, on: cell.cluster)
            try Installer.install(on: database.connect(), durability: .durable, triggers: cell.triggers)
            let eavesdropper = try Eavesdropper(database: database)
            let writer = try applicationWriter(database, privileges: "SELECT, INSERT")
            // The daemon's session, registered as serve registers it, parks once the blocker holds its row.
            let parkerPID = Mutex<String?>(nil)
            let blocked = Atomic<Bool>(false)
            let parked = Mutex<String?>(nil)
            let parking = Thread.run {
                guard let parker = try? database.connect() else { return }
                parkerPID.withLock { $0 = (try? parker.execute("SELECT pg_backend_pid()"))?.scalar }
                for _ in 0..<10_000 where !blocked.load(ordering: .relaxed) { pause(1) }
                parked.withLock { $0 = (try? parker.execute("SELECT pgherald.park('parking', true)"))?.scalar }
            }
            try await waitFor(seconds: 10) { parkerPID.withLock { $0 } != nil } failure: { "the daemon's session did not connect" }
            let pid = parkerPID.withLock { $0 }
            try database.execute("INSERT INTO pgherald.daemon (name, host, pid, backend_pid) VALUES ('parking', 'test', 1, $1::int)", parameters: [pid])
            let blocker = try database.connect()
            try blocker.execute("BEGIN")
            try blocker.execute("SELECT FROM pgherald.daemon WHERE name = 'parking' FOR UPDATE")
            blocked.store(true, ordering: .relaxed)
            try await waitFor(seconds: 10) {
                try database.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1::int", parameters: [pid]).scalar == "Lock"
            } failure: { "park() did not wait for the daemon's row" }

            try writer.execute("BEGIN")
            try writer.execute("INSERT INTO course (short_code, name) VALUES ('PARKING', 'Written while the daemon parks')")
            let writerID = try #require(try writer.execute("SELECT pg_current_xact_id()::text").scalar.flatMap { UInt64($0) })
            try blocker.execute("ROLLBACK")
            await parking.value
            #expect(parked.withLock { $0 } == "1", "park() did not finish")
            // What the daemon's closing sweep reads in, taken once park() has committed.
            let closing = try #require(TransactionSnapshot(try database.execute("SELECT pg_current_snapshot()::text").scalar ?? ""))
            try writer.execute("COMMIT")
            let rang = eavesdropper.notifications(within: .seconds(2), wanted: 1) > 0
            #expect(rang || closing.inProgress.contains(writerID),
                    "transaction \(writerID) did not ring, and the closing snapshot \(closing) does not show it running")
        }

        @Test func theBackstopFindsAnEventWhoseNotificationWasLost() async throws {
            let database = try TestDatabase.create(durability: .durable)
            let daemon = try await RunningListener(database: database, backstopInterval: .seconds(1))
            try await waitUntilParked(database)
            // Past the sweep that closes the park, which would find it as any sweep does.
            try await Task.sleep(for: .milliseconds(300))
            // A journal row as a trigger writes it, committed without its notification.
            let writer = try database.connect()
            try writer.execute("""
                INSERT INTO pgherald.journal_1 (id, txid, event)
                SELECT n, pg_current_xact_id(), concat('{"id":"', n, '","op":"INSERT","schema":"public","table":"course","pk":null,',
                       '"new":{"short_code":"LOST"},"old":null,"txid":"', pg_current_xact_id(), '","at":"2026-01-01T00:00:00.000000Z"}')
                  FROM nextval('pgherald.event_id') AS n
                """)
            let found = try await daemon.inbox.take(1, within: 5)
            #expect(found.first?.new?["short_code"] == .string("LOST"))
            // Counted once a tick shows that no notification for it is on the way.
            try await waitFor(seconds: 5) { daemon.listener.backstopEvents == 1 } failure: { "not counted as found by the backstop" }
            try await daemon.stop()
        }

        /// A ring that comes while a transaction from before the park is still
        /// open is left to a sweep, which keeps commit order; the sweep that
        /// then finds its event found nothing lost, and the backstop must not
        /// count it (it did, and warned, under any load that parks and wakes).
        @Test func aRingLeftToASweepIsNotCountedAsLost() async throws {
            let database = try TestDatabase.create(durability: .durable)
            // Open before the daemon starts, so it is running when the daemon first parks: unrung until it ends.
            let open = try database.connect()
            try open.execute("BEGIN")
            try open.execute("INSERT INTO course (short_code, name) VALUES ('OPEN', 'Open while the daemon parks')")
            let daemon = try await RunningListener(database: database, backstopInterval: .seconds(1))
            try await waitUntilParked(database)
            let writer = try database.connect()
            try writer.execute("INSERT INTO course (short_code, name) VALUES ('RANG', 'Rang while a transaction was unrung')")
            let rang = try await daemon.inbox.take(1, within: 5)
            #expect(rang.first?.new?["short_code"] == .string("RANG"))
            // Two backstop ticks, each a sweep confirmed by its notification coming back.
            try await Task.sleep(for: .milliseconds(2_500))
            #expect(daemon.listener.backstopEvents == 0, "an event whose notification came was counted as lost")
            try open.execute("COMMIT")
            let committed = try await daemon.inbox.take(1, within: 5)
            #expect(committed.first?.new?["short_code"] == .string("OPEN"))
            try await daemon.stop()
        }

        /// A connection as an application's own role: `privileges` on `course`, no grant for pgherald.
        private func applicationWriter(_ database: TestDatabase, privileges: String) throws -> LibpqConnection {
            let role = "writer_\(UInt32.random(in: 0...UInt32.max))"
            try database.execute("""
                CREATE ROLE \(role) LOGIN; GRANT \(privileges) ON course TO \(role);
                GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO \(role)
                """)
            return try LibpqConnection.connect(ConnectionString("\(database.connInfo) user=\(role)"))
        }

        private func parkedDaemons(_ database: TestDatabase) throws -> Int {
            let value: String? = try database.execute("SELECT last_value FROM pgherald.doorbell").rows.first?[0] ?? nil
            guard let value, let parked = Int(value) else { return -1 }
            return parked
        }

        private func waitUntilParked(_ database: TestDatabase) async throws {
            try await waitFor(seconds: 10) { try parkedDaemons(database) == 1 } failure: { "the daemon did not park" }
        }
    }
}

/// Listens on the install's channel beside the daemon, counting notifications.
private final class Eavesdropper {
    let connection: LibpqConnection

    init(database: TestDatabase) throws {
        connection = try database.connect()
        let channel = try #require(try Journal.notificationChannel(on: connection))
        try connection.execute("LISTEN \(try connection.escapeIdentifier(channel))")
    }

    /// Notifications that arrive by the end of `window`, or as soon as `wanted` have.
    func notifications(within window: Duration, wanted: Int = .max) -> Int {
        let deadline = ContinuousClock.now + window
        var seen = 0
        while true {
            seen += connection.takeNotifications { _, _, _ in }
            if seen >= wanted || ContinuousClock.now >= deadline { return seen }
            do throws(LibpqError) {
                try connection.awaitInput(until: deadline)
            } catch {
                return seen
            }
        }
    }
}

/// Sleeps the calling thread for `milliseconds`.
private func pause(_ milliseconds: Int) {
    usleep(useconds_t(milliseconds * 1000))
}

/// A small reproducible generator: a failing seed replays the same interleaving.
struct SeededRandom {
    private var state: UInt64

    init(seed: UInt64) { state = seed | 1 }

    mutating func next(upTo bound: Int) -> Int {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return Int(state % UInt64(bound))
    }
}

extension Thread {
    /// Runs blocking work on a thread of its own, off the test's executors.
    static func run(_ work: @escaping @Sendable () -> Void) -> Task<Void, Never> {
        let done = AsyncStream<Void>.makeStream()
        Thread {
            work()
            done.continuation.finish()
        }.start()
        return Task { for await _ in done.stream {} }
    }
}
