import Foundation
import Herald
import HeraldPostgres
import Logging
import Synchronization
import Testing

/// A listener and broker running in-process against a test database, with
/// one subscriber that records everything it receives.
final class RunningListener: Sendable {
    let broker = Broker()
    let listener: PostgresListener
    let inbox: EventInbox
    private let task: Task<Void, any Error>

    init(
        database: TestDatabase,
        backoff: BackoffPolicy = BackoffPolicy(initialDelay: .milliseconds(100), maximumDelay: .seconds(1)),
        connectTimeout: Duration = .seconds(10),
        probeInterval: Duration = .seconds(30),
        backstopInterval: Duration = .seconds(10),
        checkpointInterval: Duration = .seconds(1),
        filter: EventFilter = .all
    ) async throws {
        var logger = Logger(label: "database")
        logger.logLevel = .warning
        listener = PostgresListener(
            configuration: .init(
                connection: try ConnectionString(database.connInfo), connectTimeout: connectTimeout, backoff: backoff,
                checkpointInterval: checkpointInterval, probeInterval: probeInterval, backstopInterval: backstopInterval
            ),
            broker: broker,
            logger: logger
        )
        inbox = EventInbox(subscription: broker.subscribe(filter))
        let listener = self.listener
        task = Task { try await listener.run() }
        let listening = await listener.health.waitUntilListening()
        try #require(listening, "listener did not start")
    }

    func stop() async throws {
        listener.stop()
        try await task.value
    }

    deinit {
        listener.stop()
    }
}

/// Collects a subscription's events in the background so tests can take them in order.
final class EventInbox: Sendable {
    private final class Received: Sendable {
        let events = Mutex<[Event]>([])
        let failure = Mutex<(any Error)?>(nil)
    }

    private let received = Received()
    private let pump: Task<Void, Never>

    init(subscription: Subscription) {
        let received = self.received
        pump = Task {
            do {
                for try await event in subscription { received.events.withLock { $0.append(event) } }
            } catch {
                received.failure.withLock { $0 = error }
            }
        }
    }

    deinit {
        pump.cancel()
    }

    /// Removes and returns the next `count` events, failing after `seconds`.
    func take(_ count: Int, within seconds: Double = 10) async throws -> [Event] {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while true {
            let taken = received.events.withLock { buffer -> [Event]? in
                guard buffer.count >= count else { return nil }
                defer { buffer.removeFirst(count) }
                return Array(buffer.prefix(count))
            }
            if let taken { return taken }
            if let error = received.failure.withLock({ $0 }) { throw error }
            guard ContinuousClock.now < deadline else {
                throw InboxTimeout(expected: count, received: received.events.withLock { $0.count }, seconds: seconds)
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Events received and not taken yet.
    var count: Int { received.events.withLock { $0.count } }

    /// Takes the next event, failing after `seconds`.
    func next(within seconds: Double = 10) async throws -> Event {
        try await take(1, within: seconds)[0]
    }
}

struct InboxTimeout: Error, CustomStringConvertible {
    var expected: Int
    var received: Int
    var seconds: Double
    var description: String { "expected \(expected) events within \(seconds) s, received \(received)" }
}
