/// Decides when one live query (with one set of parameter values) runs again.
///
/// A pure state machine. Changes to its tables are coalesced as
/// ``ChangeNotifier`` coalesces refreshes (``RefreshCoalescer``), so a burst
/// gives one evaluation however many subscribers share it. A change whose
/// transaction the last result's snapshot already shows committed is in
/// that result and is skipped; one that arrives while the query runs is
/// kept until the new snapshot says whether it made it in. So no commit is
/// missed, and none makes the query run twice.
public struct LiveQueryScheduler: Sendable {
    public typealias Instant = ContinuousClock.Instant

    public enum Action: Sendable, Hashable {
        case none
        /// Call ``timerFired(at:)`` at this instant.
        case startTimer(Instant)
        /// Run the query, then call ``evaluated(snapshot:at:)``, or ``failed(at:retryAt:)`` when it could not reach the database.
        case evaluate
        /// The database could not be reached: call ``retryDue()`` at this instant.
        case retry(Instant)
    }

    private var coalescer: RefreshCoalescer
    /// The snapshot of the last result: what it includes.
    public private(set) var covered: TransactionSnapshot?
    private var evaluating = false
    /// Transactions whose changes arrived while the query ran; nil stands for a change of unknown transaction.
    private var arrivedWhileEvaluating: [UInt64?] = []
    /// The newest transaction whose change a result is known to include.
    public private(set) var newestIncluded: UInt64?
    private var pendingNewest: UInt64?
    private var retrying = false

    public init(configuration: RefreshCoalescer.Configuration = .init()) {
        coalescer = RefreshCoalescer(configuration: configuration)
    }

    /// Whether the query is running now.
    public var isEvaluating: Bool { evaluating }

    /// An evaluation for a first subscriber, at once and not coalesced; any
    /// change already waiting is in it. Nothing when one is running.
    public mutating func start() -> Action {
        guard !evaluating else { return .none }
        coalescer = RefreshCoalescer(configuration: coalescer.configuration)
        retrying = false
        evaluating = true
        return .evaluate
    }

    /// The query could not reach the database: it runs again at `retryAt`,
    /// and then includes whatever arrived meanwhile.
    public mutating func failed(at now: Instant, retryAt: Instant) -> Action {
        evaluating = false
        _ = coalescer.refreshFinished(at: now)
        coalescer = RefreshCoalescer(configuration: coalescer.configuration)
        arrivedWhileEvaluating.removeAll()
        retrying = true
        return .retry(retryAt)
    }

    /// The retry that ``failed(at:retryAt:)`` asked for is due.
    public mutating func retryDue() -> Action {
        guard retrying, !evaluating else { return .none }
        retrying = false
        evaluating = true
        return .evaluate
    }

    /// A change to a table the query reads.
    /// - Parameter transactionID: nil when unknown (the broker dropped events): always runs again.
    public mutating func changeArrived(transactionID: UInt64?, at now: Instant) -> Action {
        // A retry reads everything anew.
        if retrying { return .none }
        if evaluating {
            arrivedWhileEvaluating.append(transactionID)
            return .none
        }
        if let transactionID, covered?.isVisible(transactionID) == true { return .none }
        if let transactionID { pendingNewest = max(pendingNewest ?? 0, transactionID) }
        return map(coalescer.changeArrived(at: now, transaction: transactionID.map(String.init)))
    }

    public mutating func timerFired(at now: Instant) -> Action {
        let action = map(coalescer.timerFired(at: now))
        if action == .evaluate { evaluating = true }
        return action
    }

    /// The query ran and saw `snapshot`.
    public mutating func evaluated(snapshot: TransactionSnapshot, at now: Instant) -> Action {
        evaluating = false
        _ = coalescer.refreshFinished(at: now)
        covered = snapshot
        if let pending = pendingNewest, snapshot.isVisible(pending) { newestIncluded = max(newestIncluded ?? 0, pending) }
        pendingNewest = nil
        let arrived = arrivedWhileEvaluating
        arrivedWhileEvaluating.removeAll()
        var action = Action.none
        for transactionID in arrived {
            if let transactionID, snapshot.isVisible(transactionID) {
                newestIncluded = max(newestIncluded ?? 0, transactionID)
                continue
            }
            let next = changeArrived(transactionID: transactionID, at: now)
            if next != .none { action = next }
        }
        return action
    }

    private func map(_ action: RefreshCoalescer.Action) -> Action {
        switch action {
        case .none: .none
        case .startTimer(let instant): .startTimer(instant)
        case .refresh: .evaluate
        }
    }
}
