/// Decides when registered view models refresh, so that a burst of changes
/// (a 1000-row transaction) causes one refresh rather than one per row.
///
/// A pure state machine: feed it what happened and carry out the action it
/// returns. A refresh starts once changes have been quiet for `quietPeriod`,
/// or `maximumDelay` after the first unrefreshed change if they never go
/// quiet. Refreshes never overlap; changes during one schedule exactly one more.
public struct RefreshCoalescer: Sendable {
    public typealias Instant = ContinuousClock.Instant

    /// Timing of coalesced refreshes.
    public struct Configuration: Sendable, Hashable {
        /// How long changes must pause before a refresh starts. Default 25 ms:
        /// long enough that a large transaction, which arrives in several
        /// socket reads, counts as one burst on a busy machine.
        public var quietPeriod: Duration
        /// The longest a change waits for its refresh during a steady stream. Default 250 ms.
        public var maximumDelay: Duration

        public init(quietPeriod: Duration = .milliseconds(25), maximumDelay: Duration = .milliseconds(250)) {
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
        case pending(firstChange: Instant, lastChange: Instant)
        case refreshing(changedSinceStart: Bool)
    }

    public let configuration: Configuration
    private(set) var state: State = .idle

    public init(configuration: Configuration = .init()) {
        self.configuration = configuration
    }

    public mutating func changeArrived(at now: Instant) -> Action {
        switch state {
        case .idle:
            state = .pending(firstChange: now, lastChange: now)
            return .startTimer(now + configuration.quietPeriod)
        case .pending(let first, _):
            state = .pending(firstChange: first, lastChange: now)
            return .none
        case .refreshing:
            state = .refreshing(changedSinceStart: true)
            return .none
        }
    }

    public mutating func timerFired(at now: Instant) -> Action {
        guard case .pending(let first, let last) = state else { return .none }
        let due = min(last + configuration.quietPeriod, first + configuration.maximumDelay)
        if now >= due {
            state = .refreshing(changedSinceStart: false)
            return .refresh
        }
        return .startTimer(due)
    }

    public mutating func refreshFinished(at now: Instant) -> Action {
        guard case .refreshing(let changed) = state else { return .none }
        if changed {
            state = .pending(firstChange: now, lastChange: now)
            return .startTimer(now + configuration.quietPeriod)
        }
        state = .idle
        return .none
    }
}
