import Herald
import HeraldClient
import Synchronization

/// Everything a `HeraldClient` stream on one table receives, across
/// reconnects and daemon restarts (it resumes with Last-Event-ID).
final class ResumingSubscriber: Sendable {
    private final class Received: Sendable {
        let events = Mutex<[Event]>([])
        let resets = Mutex<[String]>([])
        /// Where the stream was re-established: the number of events received by then.
        let reconnects = Mutex<[Int]>([])
    }

    private let received = Received()
    private let task: Task<Void, any Error>

    init(socketPath: String, table: String) {
        let received = self.received
        task = Task {
            let client = HeraldClient(socketPath: socketPath)
            for try await message in client.messages(EventFilter(tables: [TableName(name: table)])) {
                switch message {
                case .event(let event): received.events.withLock { $0.append(event) }
                case .reset(let reason): received.resets.withLock { $0.append(reason) }
                case .reconnected: received.reconnects.withLock { $0.append(received.events.withLock { $0.count }) }
                case .unreachable, .transaction: break
                }
            }
        }
    }

    deinit { task.cancel() }

    var events: [Event] { received.events.withLock { $0 } }
    var resets: [String] { received.resets.withLock { $0 } }
    var reconnects: [Int] { received.reconnects.withLock { $0 } }

    /// Row id (the `id` column) → the ids of the events that delivered it.
    var deliveries: [Int64: [String]] {
        events.reduce(into: [:]) { result, event in
            if case .number(let number)? = event.row?["id"], let id = Int64(number.description) {
                result[id, default: []].append(event.id)
            }
        }
    }
}
