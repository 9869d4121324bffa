import Glibc
import Synchronization

/// A live stream of the events that match one subscriber's filter.
///
/// Iterate it once, from one task. The stream ends when the broker shuts
/// down or the consuming task is cancelled, and throws
/// ``SubscriptionOverflowError`` if the consumer fell too far behind.
/// Dropping the subscription unregisters it.
public final class Subscription: AsyncSequence, Sendable {
    public typealias Element = Event
    public typealias Failure = SubscriptionOverflowError

    /// Identifies the subscription within its broker.
    public let id: UInt64
    public let filter: EventFilter
    /// The change count of the last event published before the subscription
    /// began: it gets the events counted after it.
    public let startCount: UInt64
    let mailbox: Mailbox
    private let broker: Broker
    /// Whether the filter's conditions on columns are checked here, on the consumer's task, rather
    /// than by the publisher: one subscriber's costly conditions (a `like` over long rows) must not
    /// hold up the delivery to every other.
    private let checksColumns: Bool
    /// How many events ``pollDelivery(limit:)`` takes while it checks columns; only its caller's loop uses it.
    private let checkBatch: Mutex<ColumnCheckBatch>

    init(id: UInt64, filter: EventFilter, startCount: UInt64, mailbox: Mailbox, broker: Broker) {
        self.id = id
        self.filter = filter
        self.startCount = startCount
        self.mailbox = mailbox
        self.broker = broker
        checksColumns = filter.readsColumns
        checkBatch = Mutex(ColumnCheckBatch(startsCostly: filter.matchesPatterns))
    }

    /// The events a consumer on a task lets through: on ``ColumnCheckLane`` once its checks have
    /// proved costly, else here, yielding its thread each millisecond of checking, so that a costly
    /// filter takes its time from its own turns, not from the other consumers'.
    private func passingInTurns(_ events: [Event]) async -> [Event] {
        guard checksColumns else { return events }
        if checksAreCostly {
            return await ColumnCheckLane.shared.run { self.passingColumns(events) }
        }
        var passed: [Event] = []
        var turnStarted = ContinuousClock.now
        var spent = Duration.zero
        var cpuStarted = ColumnCheckLane.threadCPUTime()
        for event in events {
            if filter.matches(event) { passed.append(event) }
            if ContinuousClock.now - turnStarted > .milliseconds(1) {
                spent += ColumnCheckLane.threadCPUTime() - cpuStarted
                await Task.yield()
                turnStarted = .now
                cpuStarted = ColumnCheckLane.threadCPUTime()
            }
        }
        spent += ColumnCheckLane.threadCPUTime() - cpuStarted
        checkBatch.withLock { $0.checked(events.count, took: spent) }
        return passed
    }

    /// Whether this subscription's checks of columns have cost enough an event that its consumer
    /// should have them run on ``ColumnCheckLane`` (``pollUnchecked(limit:bytes:)``, ``passingColumns(_:)``).
    public var checksAreCostly: Bool {
        checksColumns && checkBatch.withLock { $0.isCostly }
    }

    /// The events that pass the filter's conditions on columns, the cost counted toward
    /// ``checksAreCostly``; for events that ``pollUnchecked(limit:bytes:)`` returned.
    public func passingColumns(_ events: [Event]) -> [Event] {
        guard checksColumns else { return events }
        let started = ColumnCheckLane.threadCPUTime()
        let passed = events.filter(filter.matches)
        let took = ColumnCheckLane.threadCPUTime() - started
        checkBatch.withLock { $0.checked(events.count, took: took) }
        return passed
    }

    deinit {
        broker.unsubscribe(id: id)
    }

    /// Stops the stream; the consumer gets the events already buffered, then the end.
    public func cancel() {
        broker.unsubscribe(id: id)
    }

    /// Waits for the next events and returns all that are buffered, up to `limit`.
    ///
    /// Batches let an output write many events with one system call.
    /// Returns an empty array at the end of the stream. Runs on the caller's
    /// actor, so a main-actor consumer does not hop executors per batch.
    public func nextBatch(
        limit: Int = 1024,
        isolation: isolated (any Actor)? = #isolation
    ) async throws(SubscriptionOverflowError) -> [Event] {
        while true {
            switch try await mailbox.take(upTo: limit) {
            case .events(let events):
                let passed = await passingInTurns(events)
                if !passed.isEmpty { return passed }
            case .finished: return []
            case .heartbeat: continue
            }
        }
    }

    /// What ``nextDelivery(limit:isolation:)`` waited for.
    public enum Delivery: Sendable {
        case events([Event])
        /// The broker asked idle subscribers to show they are alive (see ``Broker/requestHeartbeat()``).
        case heartbeat
        /// The stream has ended.
        case finished
    }

    /// Like ``nextBatch(limit:isolation:)``, but also returns when a heartbeat
    /// is due while nothing is buffered. Needs `wantsHeartbeats` at subscribe.
    /// - Parameter bytes: past the first event, at most this many bytes of
    ///   events (``Event/retainedBytes``), so that a batch of large rows
    ///   framed for a client that does not read stays small.
    public func nextDelivery(
        limit: Int = 1024,
        bytes: Int = .max,
        isolation: isolated (any Actor)? = #isolation
    ) async throws(SubscriptionOverflowError) -> Delivery {
        while true {
            switch try await mailbox.take(upTo: limit, bytes: bytes) {
            case .events(let events):
                let passed = await passingInTurns(events)
                if !passed.isEmpty { return .events(passed) }
            case .heartbeat: return .heartbeat
            case .finished: return .finished
            }
        }
    }

    /// What ``nextDelivery(limit:isolation:)`` would return now, without
    /// waiting; nil when it would wait. For consumers driven by callbacks
    /// rather than a task: see ``whenReady(_:)``. The events may be none, when
    /// those taken all failed the filter's conditions on columns.
    public func pollDelivery(limit: Int = 1024, bytes: Int = .max) throws(SubscriptionOverflowError) -> Delivery? {
        guard checksColumns else {
            switch try mailbox.poll(upTo: limit, bytes: bytes) {
            case .events(let events)?: return .events(events)
            case .heartbeat?: return .heartbeat
            case .finished?: return .finished
            case nil: return nil
            }
        }
        // Checked in batches that fit the budget at the cost seen so far, one event at a time when
        // that is costly; a batch that fails whole comes back empty: the caller, which cannot yield
        // in the middle, decides between batches whether its turn goes on.
        switch try pollUnchecked(limit: limit, bytes: bytes) {
        case .events(let events)?: return .events(passingColumns(events))
        case let other: return other
        }
    }

    /// Like ``pollDelivery(limit:bytes:)``, but the events are not yet checked against the
    /// filter's conditions on columns: the caller has ``passingColumns(_:)`` check them, on
    /// ``ColumnCheckLane`` when ``checksAreCostly``. As many as the checking budget allows.
    public func pollUnchecked(limit: Int = 1024, bytes: Int = .max) throws(SubscriptionOverflowError) -> Delivery? {
        let size = checksColumns ? Swift.min(limit, checkBatch.withLock { $0.size }) : limit
        switch try mailbox.poll(upTo: size, bytes: bytes) {
        case .events(let events)?: return .events(events)
        case .heartbeat?: return .heartbeat
        case .finished?: return .finished
        case nil: return nil
        }
    }

    /// Calls `wake` once, as soon as ``pollDelivery(limit:)`` has something
    /// to return: at once if it has now, else on the broker's publishing
    /// thread, which `wake` must not hold up.
    public func whenReady(_ wake: @escaping @Sendable () -> Void) {
        mailbox.whenReady(wake)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let subscription: Subscription
        var pending: ArraySlice<Event> = []

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(SubscriptionOverflowError) -> Event? {
            if pending.isEmpty {
                pending = try await subscription.nextBatch()[...]
            }
            return pending.popFirst()
        }

        public mutating func next() async throws(SubscriptionOverflowError) -> Event? {
            try await next(isolation: nil)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(subscription: self)
    }
}
