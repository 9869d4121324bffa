public import Herald
import Synchronization

/// Subscribers who share one ``RowSecurityIdentity``: the events the
/// identity may see, checked once for all of them and published on the
/// cohort's own broker.
public final class RowSecurityCohort: Sendable {
    public let identity: RowSecurityIdentity
    /// Unique for the daemon's life: what the cohort's restricted events are cached under.
    public let serial: UInt64
    /// Subscribe here as to the daemon's broker: what it publishes is what the identity may see.
    public let broker: Broker
    private let state = Mutex(State())

    private struct State {
        var watchers: [UInt64: @Sendable (String) -> Void] = [:]
        var nextWatcher: UInt64 = 1
        var failure: String?
        var idleSince: ContinuousClock.Instant?
        /// Per table, the cohort's count when it last missed an event of it: an event not judged for the
        /// cohort because none of its subscribers followed the table then came after that count.
        var missedAfter: [TableName: UInt64] = [:]
    }

    private static let serials = Atomic<UInt64>(0)

    init(identity: RowSecurityIdentity, broker: Broker) {
        serial = Self.serials.add(1, ordering: .relaxed).newValue
        self.identity = identity
        self.broker = broker
    }

    /// Calls `ended` with the reason if the cohort's checks fail (a policy
    /// raised an error, the role cannot be set): its streams end with it.
    /// Returns the watch, for ``unwatch(_:)`` when the stream ends first.
    public func watch(_ ended: @escaping @Sendable (String) -> Void) -> UInt64 {
        let (id, failure) = state.withLock { state in
            let id = state.nextWatcher
            state.nextWatcher += 1
            if state.failure == nil { state.watchers[id] = ended }
            return (id, state.failure)
        }
        if let failure { ended(failure) }
        return id
    }

    public func unwatch(_ id: UInt64) {
        _ = state.withLock { $0.watchers.removeValue(forKey: id) }
    }

    /// Records that events of `tables` in the batch being judged were not judged for the cohort.
    func missed(_ tables: Set<TableName>) {
        let count = broker.lastCount
        state.withLock { state in
            for table in tables { state.missedAfter[table] = count }
        }
    }

    /// Whether the cohort's history lacks an event of one of `tables` (any
    /// table when nil) after its event `eventID`: a stream resuming there
    /// must read the journal, as a stream new to the cohort does.
    public func hasMissed(after eventID: String, of tables: Set<TableName>?) -> Bool {
        guard let resumed = broker.deliveredCount(of: eventID) else { return true }
        return state.withLock { state in
            state.missedAfter.contains { table, count in count >= resumed && (tables?.contains(table) ?? true) }
        }
    }

    /// Why the cohort ended, if its checks failed.
    public var failure: String? { state.withLock { $0.failure } }

    /// Ends every stream of the cohort with `reason`.
    func fail(_ reason: String) {
        let watchers = state.withLock { state in
            state.failure = reason
            defer { state.watchers = [:] }
            return Array(state.watchers.values)
        }
        for ended in watchers { ended(reason) }
        broker.shutdown()
    }

    /// Whether it has had no subscriber for `lifetime`; marks when it became idle.
    func isIdle(for lifetime: Duration, now: ContinuousClock.Instant) -> Bool {
        let subscribed = broker.hasSubscribers
        return state.withLock { state in
            if subscribed {
                state.idleSince = nil
                return false
            }
            let since = state.idleSince ?? now
            state.idleSince = since
            return now - since >= lifetime
        }
    }
}
