public import Herald

/// The listener's connection life cycle as a pure state machine.
///
/// The first connection must succeed: a wrong conninfo or password at start
/// is reported once, and the daemon exits instead of retrying forever. Once
/// the listener has been up, every loss is followed by reconnect attempts
/// with capped exponential backoff, until it is stopped. A connection that
/// is lost within ``stableConnection`` of opening does not restart the
/// schedule: a server that accepts and then drops every session (one that
/// shuts down, or a pooler in front of a dead server) is retried with growing
/// delays, not once every 250 ms.
public struct ReconnectStateMachine: Sendable {
    public enum State: Sendable, Hashable {
        case idle
        case connecting(attempt: Int)
        /// Connected by `attempt` (0 for the first connection).
        case listening(attempt: Int)
        case waitingToReconnect(attempt: Int)
        case stopped
    }

    public enum Action: Sendable, Hashable {
        /// Open a connection and LISTEN; then report `connected` or `connectFailed`.
        case connect(attempt: Int)
        /// Connected: receive notifications until the connection is lost or stopped.
        case listen
        /// Wait, then report `backoffElapsed`.
        case waitBeforeReconnect(Duration, attempt: Int)
        /// The very first connection failed: report the error and end.
        case failStartup
        /// Close the connection, if any, and end.
        case close
        case none
    }

    /// How long a connection must have held for its loss to start the backoff again from the first delay.
    public static let stableConnection: Duration = .seconds(30)

    public let backoff: BackoffPolicy
    public private(set) var state: State = .idle
    /// Whether a connection has ever been established; decides startup failure vs. retry.
    public private(set) var hasListened = false

    public init(backoff: BackoffPolicy = .init()) {
        self.backoff = backoff
    }

    public mutating func start() -> Action {
        guard case .idle = state else { return .none }
        state = .connecting(attempt: 0)
        return .connect(attempt: 0)
    }

    public mutating func connected() -> Action {
        guard case .connecting(let attempt) = state else { return .none }
        state = .listening(attempt: attempt)
        hasListened = true
        return .listen
    }

    /// - Parameter random: a sample from `0..<1` for the backoff jitter.
    public mutating func connectFailed(random: Double) -> Action {
        guard case .connecting(let attempt) = state else { return .none }
        guard hasListened else {
            state = .stopped
            return .failStartup
        }
        return scheduleReconnect(attempt: attempt + 1, random: random)
    }

    /// - Parameters:
    ///   - heldFor: how long the connection was open.
    ///   - random: a sample from `0..<1` for the backoff jitter.
    public mutating func connectionLost(heldFor: Duration, random: Double) -> Action {
        guard case .listening(let attempt) = state else { return .none }
        return scheduleReconnect(attempt: heldFor >= Self.stableConnection ? 1 : attempt + 1, random: random)
    }

    public mutating func backoffElapsed() -> Action {
        guard case .waitingToReconnect(let attempt) = state else { return .none }
        state = .connecting(attempt: attempt)
        return .connect(attempt: attempt)
    }

    public mutating func stop() -> Action {
        switch state {
        case .stopped:
            return .none
        default:
            state = .stopped
            return .close
        }
    }

    private mutating func scheduleReconnect(attempt: Int, random: Double) -> Action {
        state = .waitingToReconnect(attempt: attempt)
        return .waitBeforeReconnect(backoff.delay(beforeAttempt: attempt, random: random), attempt: attempt)
    }
}
