/// Whether an endpoint may be sent to now: a pure state machine, one per
/// endpoint and daemon.
///
/// While the receiver answers, up to `concurrency` requests are in flight.
/// After a retryable failure the gate closes for a backoff step and then lets
/// one probe through at a time; the first success opens it again. So a
/// receiver that is down for hours costs one attempt per step, not one per
/// pending event, and events do not run out of attempts while it is away.
///
/// Requests in flight when a failure closes the gate fail for the same reason;
/// each carries the gate's generation, and only failures of the current
/// generation lengthen the backoff.
public struct EndpointGate: Sendable, Hashable {
    public let concurrency: Int
    public let schedule: RetrySchedule
    /// Retryable failures in a row, counted once per generation.
    public private(set) var consecutiveFailures = 0
    public private(set) var generation = 0
    private var closedUntil: ContinuousClock.Instant?

    /// What the dispatcher may do now.
    public enum Permit: Sendable, Hashable {
        /// Send up to this many more requests.
        case send(Int)
        /// Send nothing before this instant.
        case wait(until: ContinuousClock.Instant)
        /// Requests are in flight; wait for them.
        case full
    }

    public init(concurrency: Int, schedule: RetrySchedule = .init()) {
        self.concurrency = max(1, concurrency)
        self.schedule = schedule
    }

    public var isFailing: Bool { consecutiveFailures > 0 }

    public func permit(now: ContinuousClock.Instant, inFlight: Int) -> Permit {
        if let closedUntil, now < closedUntil { return .wait(until: closedUntil) }
        let limit = isFailing ? 1 : concurrency
        return inFlight < limit ? .send(limit - inFlight) : .full
    }

    /// Records the outcome of a request sent in `generation`.
    public mutating func record(
        _ outcome: DeliveryOutcome,
        sentIn generation: Int,
        now: ContinuousClock.Instant,
        jitter: Double
    ) {
        switch outcome {
        case .delivered, .permanent:
            // The receiver is up, even when it refuses one event.
            consecutiveFailures = 0
            closedUntil = nil
            self.generation += 1
        case .retryable(_, _, let retryAfter):
            guard generation == self.generation else { return }
            consecutiveFailures += 1
            self.generation += 1
            let wait = max(retryAfter.map { min($0, schedule.cap) } ?? .zero, schedule.delay(afterFailures: consecutiveFailures, jitter: jitter))
            closedUntil = now + wait
        }
    }
}
