import Synchronization

/// Counts every change and fans each event out to the subscribers whose filter matches.
///
/// `publish` is called from the listener thread and never blocks on a
/// subscriber: each subscriber has a bounded ``Mailbox``. A subscriber whose
/// mailbox is full is dropped (its stream throws ``SubscriptionOverflowError``
/// after the events it already has), and everyone else carries on.
public final class Broker: Sendable {
    /// Broker settings.
    public struct Configuration: Sendable {
        /// Events a subscriber may fall behind before it is dropped. Default 4096.
        public var mailboxCapacity: Int
        /// Recent events kept for subscribers that resume after a disconnect. Default 100,000.
        public var historyCapacity: Int
        /// The most memory the history's events may take, counted as
        /// ``Event/retainedBytes`` (their JSON and rows as held, and the
        /// objects around them). Default 96 MiB: about 110,000 events of a
        /// 100-byte row, so that a 100,000-row statement fits whole and
        /// every stream reading it stays in memory, not in the journal.
        public var historyByteLimit: Int

        public init(mailboxCapacity: Int = 4096, historyCapacity: Int = 100_000, historyByteLimit: Int = 96 << 20) {
            self.mailboxCapacity = mailboxCapacity
            self.historyCapacity = historyCapacity
            self.historyByteLimit = historyByteLimit
        }
    }

    /// A class, so that the fan-out loop retains one reference per subscriber, not four.
    final class Subscriber: Sendable {
        let id: UInt64
        /// What the publisher checks: the subscriber's filter, less its conditions on columns,
        /// which its ``Subscription`` checks on the consumer's task.
        let filter: EventFilter
        let mailbox: Mailbox
        let kind: String
        let onOverflow: (@Sendable () -> Void)?
        /// Whether every event passes the filter, so deliveries need no check.
        let takesEverything: Bool

        init(id: UInt64, filter: EventFilter, mailbox: Mailbox, kind: String, onOverflow: (@Sendable () -> Void)?) {
            self.id = id
            self.filter = filter.readsColumns ? filter.withoutColumnConditions : filter
            self.mailbox = mailbox
            self.kind = kind
            self.onOverflow = onOverflow
            takesEverything = self.filter == .all
        }
    }

    struct State {
        var changeCount: UInt64 = 0
        var operationCounts: [TableOperation: UInt64] = [:]
        var nextSubscriberID: UInt64 = 1
        /// Subscribers that name their tables, indexed by each of those tables.
        var subscribersByTable: [TableName: SubscriberList] = [:]
        /// Subscribers interested in every table (possibly narrowed by schema or op).
        var subscribersForAllTables = SubscriberList()
        var overflowCount: UInt64 = 0
        /// Overflowed subscribers that read on from the history (those with an `onOverflow`), by id: the
        /// tables they follow (nil for all), which still count as followed until the subscription is cancelled.
        var catchingUp: [UInt64: Set<TableName>?] = [:]
        var isShutDown = false
        var history: EventHistory
        var lastResumableEventID: String?
    }

    public let configuration: Configuration
    let state: Mutex<State>
    /// Holders of a ``TransactionEndsDemand``: while there are any, the listener marks transaction ends.
    let transactionEndDemand = Atomic<Int>(0)
    private let reachedByLastPublish = Atomic<Int>(0)

    public init(configuration: Configuration = .init()) {
        self.configuration = configuration
        state = Mutex(State(history: EventHistory(
            capacity: configuration.historyCapacity,
            byteLimit: configuration.historyByteLimit
        )))
    }

    /// Registers a subscriber and returns its live stream.
    ///
    /// The stream sees every event published after this call returns.
    /// - Parameters:
    ///   - capacity: mailbox size for this subscriber; defaults to the broker's.
    ///   - byteCapacity: the most bytes of events its mailbox holds (one event always fits); no limit by default.
    ///   - kind: a label for statistics, such as `sse` or `stdout`.
    ///   - wantsHeartbeats: wake the consumer on ``requestHeartbeat()`` (see ``Subscription/nextDelivery(limit:isolation:)``).
    ///   - onOverflow: called once, without the broker's lock, when the subscriber is dropped for falling behind.
    public func subscribe(
        _ filter: EventFilter = .all,
        capacity: Int? = nil,
        byteCapacity: Int? = nil,
        kind: String = "in-process",
        wantsHeartbeats: Bool = false,
        onOverflow: (@Sendable () -> Void)? = nil
    ) -> Subscription {
        subscribe(
            filter, resumingAfter: nil, capacity: capacity, byteCapacity: byteCapacity, kind: kind, wantsHeartbeats: wantsHeartbeats, onOverflow: onOverflow
        ).subscription
    }

    /// Registers a subscriber that continues after the event `eventID`.
    ///
    /// - Returns: the live stream, and the events delivered after `eventID`
    ///   that match the filter, to be consumed first; together they have no
    ///   gap and no duplicate. `replay` is `nil` when `eventID` is older than
    ///   the broker's history (then the caller must find the missed events
    ///   elsewhere, such as the journal).
    public func subscribe(
        _ filter: EventFilter = .all,
        resumingAfter eventID: String?,
        capacity: Int? = nil,
        byteCapacity: Int? = nil,
        kind: String = "in-process",
        wantsHeartbeats: Bool = false,
        onOverflow: (@Sendable () -> Void)? = nil
    ) -> (subscription: Subscription, replay: [Event]?) {
        subscribe(filter, capacity: capacity, byteCapacity: byteCapacity, kind: kind, wantsHeartbeats: wantsHeartbeats, onOverflow: onOverflow) { history in
            eventID.flatMap { history.events(after: $0, matching: filter) }
        }
    }

    /// Registers a subscriber that continues after the event counted
    /// `position`, for a consumer that fell behind its mailbox and caught up
    /// from the history (``historyEvents(afterCount:matching:limit:)``).
    ///
    /// - Returns: the live stream, and the events after `position` that match
    ///   the filter, to be consumed first; `replay` is `nil` when the history
    ///   no longer holds what follows `position`.
    public func subscribe(
        _ filter: EventFilter = .all,
        resumingAfterCount position: UInt64,
        capacity: Int? = nil,
        byteCapacity: Int? = nil,
        kind: String = "in-process",
        wantsHeartbeats: Bool = false,
        onOverflow: (@Sendable () -> Void)? = nil
    ) -> (subscription: Subscription, replay: [Event]?) {
        subscribe(filter, capacity: capacity, byteCapacity: byteCapacity, kind: kind, wantsHeartbeats: wantsHeartbeats, onOverflow: onOverflow) { history in
            history.events(afterCount: position, matching: filter, limit: .max, scanLimit: .max)?.events
        }
    }

    /// For a consumer that fell behind its mailbox: up to `limit` of the
    /// events after the change count `position` that `filter` matches, read
    /// from the history like a cursor, with the position reached and whether
    /// that is the newest event. Nil once the history no longer holds what
    /// follows `position`. Reads at most 8,192 events per call, so that a
    /// narrow filter does not hold the broker's lock for long, and past the
    /// first event no more than `bytes` of them.
    public func historyEvents(
        afterCount position: UInt64, matching filter: EventFilter, limit: Int, bytes: Int = .max
    ) -> (events: [Event], position: UInt64, isNewest: Bool)? {
        state.withLock { $0.history.events(afterCount: position, matching: filter, limit: limit, scanLimit: 8_192, byteLimit: bytes) }
    }

    private func subscribe(
        _ filter: EventFilter, capacity: Int?, byteCapacity: Int?, kind: String, wantsHeartbeats: Bool, onOverflow: (@Sendable () -> Void)?,
        replaying: (EventHistory) -> [Event]?
    ) -> (subscription: Subscription, replay: [Event]?) {
        let mailbox = Mailbox(
            capacity: capacity ?? configuration.mailboxCapacity, byteCapacity: byteCapacity ?? .max, wantsHeartbeats: wantsHeartbeats
        )
        let (id, startCount, replay) = state.withLock { state -> (UInt64, UInt64, [Event]?) in
            let id = state.nextSubscriberID
            state.nextSubscriberID += 1
            let subscriber = Subscriber(id: id, filter: filter, mailbox: mailbox, kind: kind, onOverflow: onOverflow)
            if state.isShutDown {
                mailbox.finish()
            } else if let tables = filter.tables {
                for table in tables { state.subscribersByTable[table, default: SubscriberList()].insert(subscriber) }
            } else {
                state.subscribersForAllTables.insert(subscriber)
            }
            return (id, state.changeCount, replaying(state.history))
        }
        return (Subscription(id: id, filter: filter, startCount: startCount, mailbox: mailbox, broker: self), replay)
    }

    /// The newest event a subscriber may resume after (see ``subscribe(_:resumingAfter:capacity:kind:wantsHeartbeats:onOverflow:)``).
    public var lastResumableEventID: String? {
        state.withLock { $0.lastResumableEventID }
    }

    /// Tells the history which event a previous run delivered last, so that
    /// a subscriber resuming from it after a graceful restart misses nothing
    /// and repeats nothing.
    public func historyContinues(afterEventID eventID: String) {
        state.withLock { $0.history.previousRunLastEventID = eventID }
    }

    /// `events` as this broker delivered them, each with the change count it
    /// was given, for an output that reads them again from the journal. An
    /// event the history no longer holds, or that an earlier run of the
    /// daemon delivered, keeps the count it has (0 from the journal).
    public func stampedAsDelivered(_ events: [Event]) -> [Event] {
        state.withLock { state in
            events.map { event in state.history.changeCount(of: event.id).map { event.stamped(count: $0) } ?? event }
        }
    }

    /// The change count this broker gave the event `eventID`, while its history holds it.
    public func deliveredCount(of eventID: String) -> UInt64? {
        state.withLock { $0.history.changeCount(of: eventID) }
    }

    /// The count of the last event published.
    public var lastCount: UInt64 {
        state.withLock { $0.changeCount }
    }

    func unsubscribe(id: UInt64) {
        let removed = state.withLock { state in
            if !state.catchingUp.isEmpty { state.catchingUp[id] = nil }
            return state.remove(id: id)
        }
        removed?.mailbox.finish()
    }

    /// Counts and delivers events, in order. Never blocks on a subscriber.
    ///
    /// Each subscriber receives its share of `events` with one mailbox
    /// operation, so a burst costs one lock and one wake-up per subscriber.
    /// Subscribers whose filter passes the whole batch share one array.
    /// - Parameter resumable: whether a client may resume from these events
    ///   out of the in-memory history. Catch-up after a gap passes false: it
    ///   comes in transaction order, not in the order in which a client may
    ///   have seen some of these events from an earlier run, so "everything
    ///   after this one here" could skip events that client never had. Such
    ///   resumes are answered from the journal instead.
    /// - Parameter firstCount: the first event's count, the others following
    ///   it: an edge daemon counts by its stream's sequence, so that every
    ///   edge gives an event the same count. Where that jumps (the stream lost
    ///   messages before they were read), the history starts again.
    /// - Returns: the events as delivered, each stamped with its change count.
    @discardableResult
    public func publish(_ events: some Sequence<Event>, resumable: Bool = true, firstCount: UInt64? = nil) -> [Event] {
        let (stamped, overflowed) = state.withLock { state -> ([Event], [Subscriber]) in
            var stamped: [Event] = []
            stamped.reserveCapacity(events.underestimatedCount)
            // Counted by runs of one table and operation: a hash of the table's name per run, not per event.
            var run: (key: TableOperation, events: UInt64)?
            var tables = Set<TableName>()
            // An edge's counts are its stream's sequences, which start at 1.
            if let firstCount, firstCount > 0, firstCount != state.changeCount &+ 1 {
                state.history.forgetAll()
                state.changeCount = firstCount - 1
            }
            for decoded in events {
                state.changeCount += 1
                if let current = run, current.key.operation == decoded.operation, current.key.table == decoded.table {
                    run?.events += 1
                } else {
                    if let current = run { state.operationCounts[current.key, default: 0] += current.events }
                    run = (TableOperation(table: decoded.table, operation: decoded.operation), 1)
                    tables.insert(decoded.table)
                }
                let event = decoded.stamped(count: state.changeCount)
                state.history.append(event, resumable: resumable)
                if resumable { state.lastResumableEventID = event.id }
                stamped.append(event)
            }
            if let current = run { state.operationCounts[current.key, default: 0] += current.events }
            var fanOut = FanOut(events: stamped)
            for subscriber in state.subscribersForAllTables.members {
                fanOut.deliver(to: subscriber)
            }
            // A subscriber indexed under several tables of this batch gets the batch once.
            var delivered = Set<UInt64>()
            for table in tables {
                for subscriber in state.subscribersByTable[table]?.members ?? [] {
                    if tables.count > 1, !delivered.insert(subscriber.id).inserted { continue }
                    fanOut.deliver(to: subscriber)
                }
            }
            var overflowed: [Subscriber] = []
            for id in fanOut.overflowed {
                if let subscriber = state.remove(id: id) {
                    state.overflowCount += 1
                    overflowed.append(subscriber)
                    if subscriber.onOverflow != nil { state.catchingUp[id] = subscriber.filter.tables }
                }
            }
            for id in fanOut.closed { _ = state.remove(id: id) }
            reachedByLastPublish.store(fanOut.reached, ordering: .relaxed)
            return (stamped, overflowed)
        }
        for subscriber in overflowed { subscriber.onOverflow?() }
        return stamped
    }

    /// How many subscribers the last publish handed events to: what a
    /// reader that pays per read weighs its cost against.
    public var subscribersReachedByLastPublish: Int {
        reachedByLastPublish.load(ordering: .relaxed)
    }

    @discardableResult
    public func publish(_ event: Event) -> Event {
        publish(CollectionOfOne(event))[0]
    }

    /// One publish's delivery to each subscriber in turn.
    private struct FanOut {
        let events: [Event]
        /// Rows parsed for column predicates, at most once per event.
        private var rows: [LazyRow]
        private(set) var overflowed: [UInt64] = []
        private(set) var closed: [UInt64] = []
        private(set) var reached = 0
        /// Broadcasts pass only filters that ask for them, `.all` not among them.
        private let carriesBroadcasts: Bool
        /// Each event's ``Event/retainedBytes`` and their sum, added up once for every mailbox.
        private let sizes: [Int]
        private let bytes: Int

        init(events: [Event]) {
            self.events = events
            rows = events.map(LazyRow.init(event:))
            carriesBroadcasts = events.contains { $0.operation == .broadcast }
            sizes = events.map(\.retainedBytes)
            bytes = sizes.reduce(0, +)
        }

        mutating func deliver(to subscriber: Subscriber) {
            let (share, shareBytes) = subscriber.takesEverything && !carriesBroadcasts ? (events, bytes) : matching(subscriber.filter)
            guard !share.isEmpty else { return }
            switch subscriber.mailbox.offer(share, bytes: shareBytes) {
            case .accepted: reached += 1
            case .overflowed: overflowed.append(subscriber.id)
            case .closed: closed.append(subscriber.id)  // The consumer was cancelled; forget it.
            }
        }

        /// The events that pass `filter`, and their bytes; the batch itself, not a copy, when all do.
        private mutating func matching(_ filter: EventFilter) -> ([Event], Int) {
            var share: [Event]?
            var shareBytes = 0
            for index in events.indices {
                if filter.matches(events[index], row: &rows[index]) {
                    share?.append(events[index])
                    shareBytes += sizes[index]
                } else if share == nil {
                    share = Array(events[..<index])
                }
            }
            return (share ?? events, shareBytes)
        }
    }

    /// Wakes every idle subscriber that asked for heartbeats, so that it can
    /// show its peer the stream is alive.
    public func requestHeartbeat() {
        let mailboxes = state.withLock { state in
            state.allSubscribers.filter(\.mailbox.wantsHeartbeats).map(\.mailbox)
        }
        for mailbox in mailboxes { mailbox.requestHeartbeat() }
    }

    /// Ends every subscription after its buffered events; later subscriptions end at once.
    public func shutdown() {
        let subscribers = state.withLock { state -> [Subscriber] in
            state.isShutDown = true
            let all = state.allSubscribers
            state.subscribersForAllTables = SubscriberList()
            state.subscribersByTable = [:]
            return all
        }
        for subscriber in subscribers { subscriber.mailbox.finish() }
    }
}

extension Broker.State {
    /// Every registered subscriber once, including those indexed under several tables.
    var allSubscribers: [Broker.Subscriber] {
        var seen = Set(subscribersForAllTables.members.lazy.map(\.id))
        var all = Array(subscribersForAllTables.members)
        for subscribers in subscribersByTable.values {
            for subscriber in subscribers.members where seen.insert(subscriber.id).inserted {
                all.append(subscriber)
            }
        }
        return all
    }

    /// Removes a subscriber from every index it is in.
    mutating func remove(id: UInt64) -> Broker.Subscriber? {
        if let subscriber = subscribersForAllTables.remove(id: id) { return subscriber }
        var removed: Broker.Subscriber?
        // The keys copied first: iterating the dictionary's own keys view holds its storage, so each
        // removal below copied the table's whole list (15,000 channels of one table took 17 s to close).
        for table in Array(subscribersByTable.keys) {
            if let subscriber = subscribersByTable[table]?.remove(id: id) {
                removed = subscriber
                if subscribersByTable[table]?.isEmpty == true { subscribersByTable[table] = nil }
            }
        }
        return removed
    }
}
