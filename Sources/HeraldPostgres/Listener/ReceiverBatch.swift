import Herald

/// What the receiver holds between reading notifications and handing events
/// to the broker: what arrived, in order; the tick that arrived with it;
/// the events admitted for publishing and the journal positions to record
/// once they are published; and the rings the parking policy counts.
struct ReceiverBatch {
    enum Arrival {
        case event(Event)
        /// Events to read from the journal: one too large to notify, or a statement's too many.
        case reference(JournalReference)
    }

    /// The most notifications one publish carries.
    let capacity: Int
    private(set) var arrivals: [Arrival] = []
    /// The snapshot of our own tick, the last that arrived since the last publish.
    private(set) var tick: TransactionSnapshot?
    private(set) var admitted: [Event] = []
    /// Journal positions of the admitted live events, for the cursor once published.
    private(set) var positions: [(id: UInt64, transactionID: UInt64)] = []
    /// Live events with a journal position that arrived since the last publish.
    private(set) var rings = 0
    /// Events a new daemon's first sweeps deliver come in transaction order,
    /// not in the order a client may have seen them from an earlier run: not
    /// resumable until the catch-up is done.
    private(set) var resumable: Bool

    init(capacity: Int, resumable: Bool) {
        self.capacity = capacity
        self.resumable = resumable
        arrivals.reserveCapacity(capacity)
        admitted.reserveCapacity(capacity)
    }

    /// Notifications that still fit in this batch.
    var room: Int { capacity - arrivals.count }
    /// Whether a publish has nothing to do.
    var isIdle: Bool { arrivals.isEmpty && tick == nil }

    mutating func arrive(_ arrival: Arrival) {
        arrivals.append(arrival)
    }

    mutating func tickArrived(_ snapshot: TransactionSnapshot) {
        tick = snapshot
    }

    /// The tick to act on, once.
    mutating func takeTick() -> TransactionSnapshot? {
        defer { tick = nil }
        return tick
    }

    mutating func arrivalsTaken() {
        arrivals.removeAll(keepingCapacity: true)
    }

    /// Counts a live event that carries a journal position, delivered or not.
    mutating func rang() {
        rings += 1
    }

    /// The rings since the last call.
    mutating func takeRings() -> Int {
        defer { rings = 0 }
        return rings
    }

    mutating func admit(_ event: Event) {
        admitted.append(event)
    }

    /// Admits a live event whose journal position the cursor records once it is published.
    mutating func admit(_ event: Event, position: (id: UInt64, transactionID: UInt64)) {
        admitted.append(event)
        positions.append(position)
    }

    /// Marks each admitted event followed by another transaction's as the end
    /// of its own: a transaction's events arrive together and in order. The
    /// last admitted event is left to ``endLastTransaction()``.
    mutating func markTransactionEndsBeforeTheLast() {
        for index in admitted.indices.dropLast() where admitted[index].transactionID != admitted[index + 1].transactionID {
            admitted[index] = admitted[index].endingTransaction()
        }
    }

    mutating func endLastTransaction() {
        guard let last = admitted.indices.last else { return }
        admitted[last] = admitted[last].endingTransaction()
    }

    mutating func admittedPublished() {
        admitted.removeAll(keepingCapacity: true)
    }

    /// Records the published live events' positions in the cursor, and forgets them here.
    mutating func recordPositions(in cursor: inout DeliveryCursor?) {
        for position in positions { cursor?.recordDelivered(id: position.id, transactionID: position.transactionID) }
        positions.removeAll(keepingCapacity: true)
    }

    mutating func caughtUp() {
        resumable = true
    }
}
