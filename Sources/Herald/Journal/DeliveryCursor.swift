/// What a durable listener has delivered, and what it may record as done: pure, no I/O.
///
/// - A *checkpoint* is a snapshot whose visible transactions have all
///   reached the broker. It is recorded in the database, so a restarted
///   daemon catches up from it.
/// - Live events delivered since the last checkpoint are remembered by id,
///   so a catch-up after a reconnect skips them: no duplicates across reconnects.
/// - A checkpoint is confirmed by a *tick*: the listener takes a snapshot and,
///   in the same statement, notifies itself with it. Notifications arrive in
///   commit order, so when the tick arrives, every transaction visible in its
///   snapshot has arrived before it.
public struct DeliveryCursor: Sendable {
    /// The last recorded checkpoint.
    public private(set) var checkpoint: TransactionSnapshot?
    /// Delivered events not yet covered by `checkpoint`: event id → transaction id.
    public private(set) var deliveredSinceCheckpoint: [UInt64: UInt64] = [:]
    /// Transactions the current connection's catch-up covered; live events from them are dropped.
    public private(set) var coveredByCatchUp: TransactionSnapshot?
    /// While stopping: only events visible in the final snapshot are delivered, the rest are left to the next run.
    public private(set) var finalSnapshot: TransactionSnapshot?
    public private(set) var lastDeliveredEventID: UInt64?
    /// The snapshot of the tick in flight.
    public private(set) var pendingTick: TransactionSnapshot?

    public init(checkpoint: TransactionSnapshot?) {
        self.checkpoint = checkpoint
    }

    /// A connection is listening and `snapshot` was taken after LISTEN: every
    /// transaction not visible in it will be notified. Returns the range to
    /// catch up from the journal, or `nil` on a first start (nothing to replay).
    public mutating func connected(listenSnapshot snapshot: TransactionSnapshot) -> (from: TransactionSnapshot, to: TransactionSnapshot)? {
        pendingTick = nil
        coveredByCatchUp = snapshot
        guard let checkpoint else { return nil }
        return (checkpoint, snapshot)
    }

    /// Whether a journal event found by catch-up should be delivered (it was
    /// not, live); records it as delivered, so publish it right away.
    public mutating func admitCatchUp(id: UInt64, transactionID: UInt64) -> Bool {
        guard deliveredSinceCheckpoint[id] == nil else { return false }
        record(id: id, transactionID: transactionID)
        return true
    }

    /// Whether a live event should be delivered. Call ``recordDelivered(id:transactionID:)``
    /// once it has reached the broker: an event admitted but lost with its
    /// connection before publishing must stay eligible for catch-up.
    public func shouldDeliverLive(id: UInt64, transactionID: UInt64) -> Bool {
        if let coveredByCatchUp, coveredByCatchUp.isVisible(transactionID) { return false }
        if let finalSnapshot, !finalSnapshot.isVisible(transactionID) { return false }
        return deliveredSinceCheckpoint[id] == nil
    }

    /// A live event reached the broker.
    public mutating func recordDelivered(id: UInt64, transactionID: UInt64) {
        record(id: id, transactionID: transactionID)
    }

    private mutating func record(id: UInt64, transactionID: UInt64) {
        deliveredSinceCheckpoint[id] = transactionID
        lastDeliveredEventID = id
    }

    /// Catch-up delivered everything up to the listen snapshot: that is now the checkpoint to record.
    public mutating func caughtUp() -> TransactionSnapshot? {
        coveredByCatchUp
    }

    /// Whether there is progress worth a tick.
    public var needsCheckpoint: Bool {
        pendingTick == nil && (checkpoint == nil || !deliveredSinceCheckpoint.isEmpty)
    }

    /// A tick carrying `snapshot` was sent.
    public mutating func tickSent(snapshot: TransactionSnapshot) {
        pendingTick = snapshot
    }

    /// The final tick before a graceful stop was sent: from now on, events
    /// committed after `snapshot` are left for the next run to catch up.
    public mutating func finalTickSent(snapshot: TransactionSnapshot) {
        finalSnapshot = snapshot
        pendingTick = snapshot
    }

    /// A tick arrived; returns the snapshot to record when it is the one in flight.
    public mutating func tickArrived(_ snapshot: TransactionSnapshot) -> TransactionSnapshot? {
        guard pendingTick == snapshot else { return nil }
        pendingTick = nil
        return snapshot
    }

    /// `snapshot` was recorded in the database.
    public mutating func checkpointSaved(_ snapshot: TransactionSnapshot) {
        checkpoint = snapshot
        deliveredSinceCheckpoint = deliveredSinceCheckpoint.filter { !snapshot.isVisible($0.value) }
    }

    /// The connection broke: a tick in flight will never arrive.
    public mutating func disconnected() {
        pendingTick = nil
        coveredByCatchUp = nil
    }
}
