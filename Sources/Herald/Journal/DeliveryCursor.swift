/// What a durable listener has delivered, and what it may record as done: pure, no I/O.
///
/// - The listener *sweeps* the journal: it reads the events of the
///   transactions visible in a new snapshot and not in ``covered``, and then
///   everything visible in that snapshot has been delivered; it becomes
///   ``covered``, and a valid checkpoint.
/// - Notifications arrive only while the daemon is parked (the doorbell, see
///   `sql/install.sql`). Their events are delivered *live* and remembered by id
///   until a sweep covers their transaction, so no sweep repeats them.
/// - A writer that looked at the doorbell before the daemon parked commits
///   without a notification. It already had its transaction id then, so it is
///   in progress in the first snapshot swept after parking: those
///   transactions are ``unrung``, and the listener sweeps until they have ended.
/// - While parked, a *tick* confirms a sweep: the listener takes a snapshot and,
///   in the same statement, notifies itself with it. Notifications arrive in
///   commit order, so when the tick arrives, every ringing transaction visible
///   in its snapshot has arrived; an event that a sweep up to it still finds
///   was lost on the way, and the backstop caught it.
public struct DeliveryCursor: Sendable {
    /// Every event whose transaction is visible here has been delivered; `nil` before the first sweep of a first start.
    public private(set) var covered: TransactionSnapshot?
    /// The last recorded checkpoint.
    public private(set) var checkpoint: TransactionSnapshot?
    /// Events delivered live whose transactions `covered` does not show yet: event id → transaction id.
    public private(set) var deliveredLive: [UInt64: UInt64] = [:]
    /// The transactions of ``deliveredLive``: the rest of each goes live too.
    private var liveTransactions: Set<UInt64> = []
    /// Transactions in progress when the daemon parked, which may commit without ringing.
    public private(set) var unrung: Set<UInt64> = []
    public private(set) var lastDeliveredEventID: UInt64?
    /// The snapshot of the tick in flight.
    public private(set) var pendingTick: TransactionSnapshot?

    public init(checkpoint: TransactionSnapshot?) {
        self.checkpoint = checkpoint
        self.covered = checkpoint
    }

    /// What to do with an event that a notification carried.
    public enum LiveDecision: Sendable, Equatable {
        case deliver
        /// Already delivered, or a sweep covered it.
        case skip
        /// Leave it to a sweep, which delivers in order with it the
        /// transactions that committed before it without ringing: any, while
        /// the daemon reads the journal; those unrung when it parked, until
        /// they have ended.
        case sweep
    }

    /// Decides on a live event; `parked` when the daemon is parked and its
    /// closing sweep is done. Call ``recordDelivered(id:transactionID:)``
    /// once it has reached the broker: an event decided on but lost with its
    /// connection before publishing must stay eligible for a sweep.
    public func live(id: UInt64, transactionID: UInt64, parked: Bool) -> LiveDecision {
        if let covered, covered.isVisible(transactionID) { return .skip }
        if deliveredLive[id] != nil { return .skip }
        // A transaction's notifications can span two reads, and the daemon can
        // stop being parked between them: the rest of one that began live goes
        // live, so that its events stay together (a sweep would deliver them
        // after others).
        if liveTransactions.contains(transactionID) { return .deliver }
        return parked && unrung.isEmpty ? .deliver : .sweep
    }

    /// A live event reached the broker.
    public mutating func recordDelivered(id: UInt64, transactionID: UInt64) {
        deliveredLive[id] = transactionID
        liveTransactions.insert(transactionID)
        lastDeliveredEventID = id
    }

    /// Whether a swept event should be delivered: it was not, live. Records
    /// it as delivered, so publish it right away.
    public mutating func admitSwept(id: UInt64, transactionID: UInt64) -> Bool {
        guard deliveredLive[id] == nil else { return false }
        lastDeliveredEventID = id
        return true
    }

    /// Whether a swept event's transaction was in progress when the daemon parked.
    public func isUnrung(_ transactionID: UInt64) -> Bool {
        unrung.contains(transactionID)
    }

    /// A sweep delivered everything visible in `snapshot`.
    public mutating func swept(to snapshot: TransactionSnapshot) {
        covered = snapshot
        deliveredLive = deliveredLive.filter { !snapshot.isVisible($0.value) }
        liveTransactions = liveTransactions.filter { !snapshot.isVisible($0) }
        unrung = unrung.filter { !snapshot.isVisible($0) }
    }

    /// The daemon parked, and then swept up to `snapshot`: its transactions in
    /// progress may have seen the daemon awake and will not ring.
    public mutating func parked(sweptTo snapshot: TransactionSnapshot) {
        swept(to: snapshot)
        unrung = snapshot.inProgress
    }

    /// The daemon reads the journal again; every commit is swept.
    public mutating func unparked() {
        unrung = []
    }

    /// Whether a checkpoint would record progress.
    public var needsCheckpoint: Bool {
        covered != nil && covered != checkpoint
    }

    /// `snapshot` was recorded in the database.
    public mutating func checkpointSaved(_ snapshot: TransactionSnapshot) {
        checkpoint = snapshot
    }

    /// A tick carrying `snapshot` was sent.
    public mutating func tickSent(snapshot: TransactionSnapshot) {
        pendingTick = snapshot
    }

    /// A tick arrived: returns the snapshot to sweep up to when it is the one
    /// in flight and no sweep has gone past it since it was sent.
    public mutating func tickArrived(_ snapshot: TransactionSnapshot) -> TransactionSnapshot? {
        guard pendingTick == snapshot else { return nil }
        pendingTick = nil
        return snapshot
    }

    /// A sweep went past the tick in flight, which would now move `covered` back.
    public mutating func tickOvertaken() {
        pendingTick = nil
    }

    /// The connection broke: a tick in flight will never arrive, and parking
    /// ends with the session.
    public mutating func disconnected() {
        pendingTick = nil
        unrung = []
    }
}
