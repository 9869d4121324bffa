/// How long to wait before the next attempt after failures: exponential
/// (`base` doubling, capped at `cap`) with jitter.
///
/// The jitter draws from the upper half of the step, `[step/2, step]`, not
/// from `[0, step]`: it still spreads a herd of retries over half the step,
/// but a flapping receiver is never hit again at once, and until the cap each
/// gap is at least as long as the one before, so an operator reading the
/// attempts sees the backoff grow.
public struct RetrySchedule: Sendable, Hashable {
    /// The first step. Default 1 s.
    public var base: Duration
    /// The longest step. Default 1 h.
    public var cap: Duration

    public init(base: Duration = .seconds(1), cap: Duration = .seconds(3600)) {
        self.base = base
        self.cap = cap
    }

    /// The step after `failures` failures in a row (1 for the first failure).
    public func step(afterFailures failures: Int) -> Duration {
        let doublings = min(max(failures - 1, 0), 40)
        let seconds = min(base / .seconds(1) * Double(1 << UInt64(doublings)), cap / .seconds(1))
        return .seconds(seconds)
    }

    /// The wait after `failures` failures, with `unit` a random number in `[0, 1)`.
    public func delay(afterFailures failures: Int, jitter unit: Double) -> Duration {
        let step = step(afterFailures: failures) / .seconds(1)
        return .seconds(step / 2 + step / 2 * min(max(unit, 0), 1))
    }
}
