#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Capped exponential backoff with jitter, for reconnect attempts.
public struct BackoffPolicy: Sendable, Hashable {
    /// Delay before the first reconnect attempt. Default 250 ms.
    public var initialDelay: Duration
    /// No delay exceeds this. Default 30 s.
    public var maximumDelay: Duration
    /// Growth per failed attempt. Default 2.
    public var multiplier: Double
    /// Up to this fraction of each delay is removed at random, so that many
    /// daemons losing one server do not reconnect in lockstep. Default 0.5.
    public var jitter: Double

    public init(
        initialDelay: Duration = .milliseconds(250),
        maximumDelay: Duration = .seconds(30),
        multiplier: Double = 2,
        jitter: Double = 0.5
    ) {
        precondition(initialDelay > .zero && maximumDelay >= initialDelay, "delays must be positive and ordered")
        precondition(multiplier >= 1 && (0...1).contains(jitter), "multiplier must be ≥ 1 and jitter in 0...1")
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.multiplier = multiplier
        self.jitter = jitter
    }

    /// The delay before reconnect attempt `attempt` (1-based).
    /// - Parameter random: a sample from `0..<1` that picks the jitter.
    public func delay(beforeAttempt attempt: Int, random: Double) -> Duration {
        let growth = pow(multiplier, Double(min(max(attempt - 1, 0), 64)))
        let capped = initialDelay / maximumDelay * growth >= 1 ? maximumDelay : initialDelay * growth
        return capped * (1 - jitter * min(max(random, 0), 1))
    }
}
