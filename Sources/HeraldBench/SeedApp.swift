import Dispatch
import Herald
import HeraldPostgres
import Synchronization

/// One app of the seed pattern: runs the query on its own connection when told of a change.
final class SeedApp: Sendable {
    private let queue = DispatchQueue(label: "seed-app")
    private let connection: Mutex<LibpqConnection?>
    private let sql: String
    private let state = Mutex(State())

    private struct State {
        var running = false
        var again = false
        var record = StreamRecord()
        var written: [JSONValue: Int64] = [:]
        var queries = 0
    }

    init(connection: ConnectionString, sql: String) throws {
        self.connection = Mutex(try LibpqConnection.connect(connection, applicationName: "pgherald-bench seed app"))
        self.sql = "SELECT row_to_json(q)::text FROM (\(sql)) q"
    }

    var queries: Int { state.withLock { $0.queries } }

    func changeNoticed() {
        let start = state.withLock { state -> Bool in
            if state.running { state.again = true; return false }
            state.running = true
            return true
        }
        if start { queue.async { self.refresh() } }
    }

    private func refresh() {
        while true {
            let rows = connection.withLock { connection -> [JSONValue] in
                guard let result = try? connection?.execute(sql) else { return [] }
                return result.rows.compactMap { $0.first.flatMap { $0 }.flatMap { try? JSONParser.parse($0) } }
            }
            let now = nowMicroseconds()
            let again = state.withLock { state -> Bool in
                state.queries += 1
                LiveQueryLoad.recordResult(rows, now: now, written: &state.written, into: &state.record)
                if state.again { state.again = false; return true }
                state.running = false
                return false
            }
            if !again { return }
        }
    }

    /// Waits until no query is running.
    func idle() async {
        while state.withLock({ $0.running }) { try? await Task.sleep(for: .milliseconds(10)) }
    }

    func take(into record: inout StreamRecord) {
        state.withLock { state in
            record.received += state.record.received
            record.latencies += state.record.latencies
            record.lastReceiptMicroseconds = max(record.lastReceiptMicroseconds, state.record.lastReceiptMicroseconds)
            if state.record.firstReceiptMicroseconds > 0 {
                record.firstReceiptMicroseconds = record.firstReceiptMicroseconds == 0
                    ? state.record.firstReceiptMicroseconds : min(record.firstReceiptMicroseconds, state.record.firstReceiptMicroseconds)
            }
        }
    }
}
