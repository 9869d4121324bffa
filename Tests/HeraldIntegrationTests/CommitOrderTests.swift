import Foundation
import Herald
import HeraldPostgres
import Synchronization
import Testing

extension IntegrationTests {
    /// Two transactions that wrote the same row arrive in the order they
    /// committed, though the one that committed last took its transaction id
    /// first: A takes its id, B updates row R, A waits for B's lock on R, B
    /// commits, then A updates R and commits. A consumer that applies changes
    /// in delivery order must end with A's value, as the table does.
    @Suite
    struct CommitOrderTests {
        static let cells = TriggerCell.all.filter { $0.durability == .durable }

        /// One round of the example, under `tag`; returns once A has committed.
        /// A runs on a thread of its own, with a connection of its own, since its update blocks.
        private static func contend(tag: String, database: TestDatabase, b: LibpqConnection, random: inout SeededRandom) async throws {
            let tookItsID = Atomic<Bool>(false)
            let bHoldsTheRow = Atomic<Bool>(false)
            let failure = Mutex<String?>(nil)
            let a = Thread.run {
                do {
                    let a = try database.connect()
                    try a.execute("BEGIN")
                    // A's transaction id, taken before B's.
                    try a.execute("INSERT INTO course (short_code, name) VALUES ($1, 'A first')", parameters: ["A\(tag)"])
                    tookItsID.store(true, ordering: .releasing)
                    while !bHoldsTheRow.load(ordering: .acquiring) { usleep(200) }
                    // Waits for B's row lock.
                    try a.execute("UPDATE course SET name = $1 WHERE short_code = 'R'", parameters: ["A\(tag)"])
                    try a.execute("COMMIT")
                } catch {
                    failure.withLock { $0 = "A: \(error)" }
                    tookItsID.store(true, ordering: .releasing)
                }
            }
            while !tookItsID.load(ordering: .acquiring) { try await Task.sleep(for: .microseconds(200)) }
            try b.execute("BEGIN")
            try b.execute("UPDATE course SET name = $1 WHERE short_code = 'R'", parameters: ["B\(tag)"])
            bHoldsTheRow.store(true, ordering: .releasing)
            try await Task.sleep(for: .milliseconds(2 + random.next(upTo: 6)))
            try b.execute("COMMIT")
            await a.value
            if let failure = failure.withLock({ $0 }) { throw ContentionFailure(description: failure) }
        }

        struct ContentionFailure: Error, CustomStringConvertible {
            var description: String
        }

        /// The updates of R, as delivered: each round's B must come before its A.
        private static func misordered(_ events: [Event], rounds: [String]) -> [String] {
            let updates = events.filter { $0.operation == .update }.compactMap { $0.new?["name"]?.stringValue }
            return rounds.filter { tag in
                guard let b = updates.firstIndex(of: "B\(tag)"), let a = updates.firstIndex(of: "A\(tag)") else { return true }
                return b > a
            }
        }

        /// Rounds interleaved at random with idle gaps (the daemon parks, and
        /// notifications bring the events) and runs of writes (it reads the
        /// journal, and one sweep may find both transactions of a round), then
        /// rounds committed while the daemon is stopped, which its catch-up
        /// finds in one read.
        @Test(arguments: cells)
        func transactionsThatWroteTheSameRowArriveInCommitOrder(_ cell: TriggerCell) async throws {
            let database = try TestDatabase.create(install: false, on: cell.cluster)
            try Installer.install(on: database.connect(), durability: .durable, triggers: cell.triggers)
            try database.execute("INSERT INTO course (short_code, name) VALUES ('R', 'start')")
            let seed = UInt64.random(in: 0...UInt64(UInt32.max))
            var random = SeededRandom(seed: seed)
            let b = try database.connect()
            let filler = try database.connect()
            var daemon = try await RunningListener(database: database)
            var rounds: [String] = []
            var writes = 0
            for round in 0..<40 {
                switch random.next(upTo: 3) {
                case 0:
                    // Idle: the daemon parks, and the round's commits ring.
                    usleep(useconds_t(1000 * (25 + random.next(upTo: 30))))
                case 1:
                    // A run of writes keeps the daemon reading the journal.
                    let count = 5 + random.next(upTo: 30)
                    for index in 0..<count {
                        try filler.execute("INSERT INTO student (first_name, last_name) VALUES ($1, 'Filler')", parameters: ["F\(round).\(index)"])
                    }
                    writes += count
                default:
                    break
                }
                try await Self.contend(tag: "\(round)", database: database, b: b, random: &random)
                rounds.append("\(round)")
                writes += 3
            }
            var events = try await daemon.inbox.take(writes, within: 20)
            #expect(Self.misordered(events, rounds: rounds) == [], "seed \(seed): live delivery put A before B")
            try await daemon.stop()

            // Committed while no daemon runs: the catch-up reads them all at once.
            let gap = (40..<60).map(String.init)
            for tag in gap { try await Self.contend(tag: tag, database: database, b: b, random: &random) }
            daemon = try await RunningListener(database: database)
            events = try await daemon.inbox.take(3 * gap.count, within: 20)
            #expect(Self.misordered(events, rounds: gap) == [], "seed \(seed): the catch-up put A before B")
            let last = events.last { $0.operation == .update }?.new?["name"]?.stringValue
            let stored = try database.execute("SELECT name FROM course WHERE short_code = 'R'").scalar ?? nil
            #expect(last == stored, "seed \(seed): applied in delivery order, R would hold \(last ?? "-") while the table holds \(stored ?? "-")")
            try await daemon.stop()
        }
    }
}
