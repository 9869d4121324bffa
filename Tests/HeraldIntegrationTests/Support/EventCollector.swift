import Foundation
import Herald
import HeraldClient
import Synchronization

/// Collects the events of one `HeraldClient` stream in the background.
final class EventCollector: Sendable {
    private let received = Mutex<[Event]>([])
    /// Receipt minus the event's `at`, for each event, in seconds.
    private let lagsSeen = Mutex<[Double]>([])
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(_ client: HeraldClient, _ filter: EventFilter = .all) {
        let collecting = Task { [weak self] in
            do {
                for try await event in client.events(filter) {
                    let now = Date().timeIntervalSince1970
                    self?.received.withLock { $0.append(event) }
                    if let at = event.atNanosecondsSince1970 { self?.lagsSeen.withLock { $0.append(now - Double(at) / 1e9) } }
                }
            } catch {}
        }
        task.withLock { $0 = collecting }
    }

    deinit {
        task.withLock { $0?.cancel() }
    }

    var events: [Event] { received.withLock { $0 } }
    var lags: [Double] { lagsSeen.withLock { $0 } }

    /// Waits until `count` events have come, and returns them.
    func wait(for count: Int, within seconds: Double = 30) async throws -> [Event] {
        try await waitFor(seconds: seconds, { self.events.count >= count }, failure: { "\(self.events.count) of \(count) events" })
        return events
    }
}
