/// Turns events, in the order they were published, into one
/// ``TransactionGroup`` per committed transaction. Pure: no I/O, no clock.
///
/// A transaction ends at the event the listener marked as its last
/// (``Event/endsTransaction``), when an event of another transaction
/// follows (a transaction's events are published together, in commit
/// order), or at ``flush()``, which the caller calls at a point where every
/// transaction so far is known to be complete (the end of a journal replay).
///
/// The grouper sees every event, so that it sees every end, and keeps only
/// those `filter` passes: a transaction none of whose rows pass makes no group.
public struct TransactionGrouper: Sendable {
    /// The events a group may hold.
    public let filter: EventFilter
    private var transactionID: String?
    private var pending: [Event] = []
    /// A transaction whose start went by before this grouper began: its rest is not a whole transaction.
    private var skipping: String?

    public init(filter: EventFilter) {
        self.filter = filter
    }

    /// Leaves out the rest of `transactionID`, whose start was published
    /// before the grouper began, until an event of another transaction comes.
    public mutating func begin(after transactionID: String) {
        skipping = transactionID
    }

    /// Whether a transaction has begun and not yet ended.
    public var isInsideTransaction: Bool { transactionID != nil }

    /// Takes `events` in order and returns the groups they complete.
    public mutating func add(_ events: some Sequence<Event>) -> [TransactionGroup] {
        var completed: [TransactionGroup] = []
        for event in events {
            // A broadcast is no row change and belongs to no transaction.
            if event.operation == .broadcast { continue }
            if let skipping {
                if event.transactionID == skipping { continue }
                self.skipping = nil
            }
            if let transactionID, transactionID != event.transactionID, let group = close() {
                completed.append(group)
            }
            transactionID = event.transactionID
            if filter.matches(event) { pending.append(event) }
            if event.endsTransaction, let group = close() { completed.append(group) }
        }
        return completed
    }

    /// Ends the transaction in progress, when every event of it has been added.
    public mutating func flush() -> TransactionGroup? {
        close()
    }

    private mutating func close() -> TransactionGroup? {
        defer {
            transactionID = nil
            pending = []
        }
        guard let transactionID, !pending.isEmpty else { return nil }
        return TransactionGroup(transactionID: transactionID, events: pending)
    }
}
