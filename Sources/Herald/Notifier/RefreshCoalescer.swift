/// Decides when registered view models refresh, so that a burst of changes
/// (a 1000-row transaction) causes one refresh rather than one per row.
///
/// A pure state machine: feed it what happened and carry out the action it
/// returns. A refresh starts once changes have been quiet for `quietPeriod`.
/// If they never go quiet because transaction after transaction keeps
/// coming, it starts `maximumDelay` after the first unrefreshed change; a
/// single transaction, however long it takes to arrive, is never cut short
/// that way. Refreshes never overlap; changes during one schedule exactly one more.
public struct RefreshCoalescer: Sendable {
    public typealias Instant = ContinuousClock.Instant

    /// Timing of coalesced refreshes.
    public struct Configuration: Sendable, Hashable {
        /// How long changes must pause before a refresh starts. Default 50 ms:
        /// long enough that a large transaction, which arrives in several
        /// batches, counts as one burst on a busy machine, and short enough
        /// that people do not notice.
        public var quietPeriod: Duration
        /// The longest a change waits for its refresh while other transactions
        /// keep arriving. Default 250 ms.
        public var maximumDelay: Duration

        public init(quietPeriod: Duration = .milliseconds(50), maximumDelay: Duration = .milliseconds(250)) {
            self.quietPeriod = quietPeriod
            self.maximumDelay = maximumDelay
        }
    }

    public enum Action: Sendable, Hashable {
        case none
        /// Call `timerFired` at this instant.
        case startTimer(Instant)
        /// Refresh every view model, then call `refreshFinished`.
        case refresh
    }

    enum State: Sendable, Hashable {
        case idle
        /// `transaction` is that of the first pending change; `mixed` says a later one differed.
        case pending(firstChange: Instant, lastChange: Instant, transaction: String?, mixed: Bool)
        case refreshing(changedSinceStart: Bool)
    }

    public let configuration: Configuration
    private(set) var state: State = .idle

    public init(configuration: Configuration = .init()) {
        self.configuration = configuration
    }

    /// - Parameter transaction: the change's transaction id; nil when unknown
    ///   (such a change never counts as part of another's transaction).
    public mutating func changeArrived(at now: Instant, transaction: String?) -> Action {
        switch state {
        case .idle:
            state = .pending(firstChange: now, lastChange: now, transaction: transaction, mixed: transaction == nil)
            return .startTimer(now + configuration.quietPeriod)
        case .pending(let first, _, let pendingTransaction, let mixed):
            let differs = transaction == nil || transaction != pendingTransaction
            state = .pending(firstChange: first, lastChange: now, transaction: pendingTransaction, mixed: mixed || differs)
            return .none
        case .refreshing:
            state = .refreshing(changedSinceStart: true)
            return .none
        }
    }

    public mutating func timerFired(at now: Instant) -> Action {
        guard case .pending(let first, let last, _, let mixed) = state else { return .none }
        let quiet = last + configuration.quietPeriod
        let due = mixed ? min(quiet, first + configuration.maximumDelay) : quiet
        if now >= due {
            state = .refreshing(changedSinceStart: false)
            return .refresh
        }
        return .startTimer(due)
    }

    public mutating func refreshFinished(at now: Instant) -> Action {
        guard case .refreshing(let changed) = state else { return .none }
        if changed {
            state = .pending(firstChange: now, lastChange: now, transaction: nil, mixed: true)
            return .startTimer(now + configuration.quietPeriod)
        }
        state = .idle
        return .none
    }
}
