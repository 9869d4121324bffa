import Foundation
import HeraldPostgres
import Synchronization

/// Writers on threads of their own (libpq blocks), committing single-row
/// transactions into `fault_row` until stopped, through any fault: a broken
/// connection is reopened and the write retried. The table is the truth of
/// what committed; some transactions roll back on purpose, and one writer
/// keeps long transactions open.
final class SteadyWriter: Sendable {
    static let schema = """
        CREATE TABLE fault_row (id bigserial PRIMARY KEY, writer int NOT NULL, payload text NOT NULL)
        """

    private final class Control: Sendable {
        let running = Atomic<Bool>(true)
        let paused = Atomic<Bool>(false)
        let finished = Atomic<Int>(0)
        let attempts = Atomic<Int>(0)
    }

    private let control = Control()
    private let threadCount: Int

    /// - Parameters:
    ///   - writers: connections doing single-row transactions as fast as they can.
    ///   - pace: pause between a writer's transactions, to keep the machine usable.
    init(database: TestDatabase, writers: Int = 3, pace: Duration = .milliseconds(2)) {
        threadCount = writers + 1
        for writer in 0..<writers {
            start(name: "writer-\(writer)") { connection, round in
                // Mostly small rows; some over the NOTIFY limit; some rolled back.
                let size = round % 50 == 7 ? 20_000 : round % 10 == 3 ? 9_000 : 100
                let rollBack = round % 17 == 5
                try connection.execute("BEGIN")
                try connection.execute(
                    "INSERT INTO fault_row (writer, payload) VALUES ($1, repeat('x', $2::int))",
                    parameters: [String(writer), String(size)]
                )
                try connection.execute(rollBack ? "ROLLBACK" : "COMMIT")
                Thread.sleep(forTimeInterval: Double(pace.components.attoseconds) / 1e18)
            }
        }
        start(name: "long-transactions") { connection, round in
            // Open for over a second: long enough to span an injected fault.
            try connection.execute("BEGIN")
            try connection.execute("INSERT INTO fault_row (writer, payload) VALUES (-1, 'long, first')")
            Thread.sleep(forTimeInterval: 1.2)
            try connection.execute("INSERT INTO fault_row (writer, payload) VALUES (-1, 'long, second')")
            try connection.execute(round % 4 == 3 ? "ROLLBACK" : "COMMIT")
        }
        func start(name: String, _ body: @escaping @Sendable (LibpqConnection, Int) throws -> Void) {
            let control = self.control
            let thread = Thread {
                var connection: LibpqConnection?
                var round = 0
                while control.running.load(ordering: .relaxed) {
                    if control.paused.load(ordering: .relaxed) {
                        Thread.sleep(forTimeInterval: 0.01)
                        continue
                    }
                    do {
                        if connection == nil { connection = try database.connect() }
                        control.attempts.add(1, ordering: .relaxed)
                        try body(connection!, round)
                        round += 1
                    } catch {
                        // The server restarted or cut us off: whatever committed is in the table.
                        connection = nil
                        Thread.sleep(forTimeInterval: 0.05)
                    }
                }
                control.finished.add(1, ordering: .relaxed)
            }
            thread.name = name
            thread.start()
        }
    }

    /// Transactions attempted so far.
    var attempts: Int { control.attempts.load(ordering: .relaxed) }

    func pause() async {
        control.paused.store(true, ordering: .relaxed)
        // A long transaction in progress ends within its 1.2 s.
        try? await Task.sleep(for: .milliseconds(1500))
    }

    func resume() {
        control.paused.store(false, ordering: .relaxed)
    }

    func stop() async {
        control.running.store(false, ordering: .relaxed)
        while control.finished.load(ordering: .relaxed) < threadCount {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }
}
