/// The broadcast limits of one sender: a largest payload, and at most so
/// many messages in any one-second window. Pure: the caller gives the time.
public struct BroadcastLimiter: Sendable {
    public let maximumBytes: Int
    public let maximumPerSecond: Int
    private var windowStart: ContinuousClock.Instant?
    private var sentInWindow = 0

    public init(maximumBytes: Int, maximumPerSecond: Int) {
        self.maximumBytes = maximumBytes
        self.maximumPerSecond = maximumPerSecond
    }

    /// Counts a message of `bytes` sent at `now`, or says why it is refused (and does not count it).
    public mutating func admit(bytes: Int, now: ContinuousClock.Instant) -> String? {
        guard bytes <= maximumBytes else {
            return "a broadcast of \(bytes) bytes is larger than realtime.broadcast.max_bytes (\(maximumBytes))"
        }
        if let start = windowStart, now - start < .seconds(1) {
            guard sentInWindow < maximumPerSecond else {
                return "rate limited: at most \(maximumPerSecond) broadcasts a second (realtime.broadcast.max_per_second); slow down and send again"
            }
        } else {
            windowStart = now
            sentInWindow = 0
        }
        sentInWindow += 1
        return nil
    }
}
