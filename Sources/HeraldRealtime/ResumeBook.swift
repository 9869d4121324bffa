/// Where realtime channels stopped when their sockets dropped, so that the
/// same caller rejoining the same topic with the same bindings soon after
/// gets what it missed.
///
/// Supabase clients send no position when they rejoin, so the daemon keeps
/// one for them. A rejoin that matches takes the position; two sockets of
/// the same caller on the same topic share it, so one may receive events the
/// other missed. A position older than ``window`` is forgotten.
public struct ResumeBook: Sendable {
    /// What a rejoin must repeat to continue a channel.
    public struct Key: Sendable, Hashable {
        public var caller: String
        public var topic: String
        /// The bindings as sent, without ids.
        public var bindings: String

        public init(caller: String, topic: String, bindings: [RealtimeBinding]) {
            self.caller = caller
            self.topic = topic
            self.bindings = bindings.map { binding in
                var echo = binding.echo
                echo["id"] = nil
                return echo.jsonText
            }.joined(separator: "\u{1E}")
        }

        /// A key as another cluster member sent it, its bindings already encoded.
        public init(caller: String, topic: String, encodedBindings: String) {
            self.caller = caller
            self.topic = topic
            bindings = encodedBindings
        }
    }

    public var window: Duration
    /// Positions kept at most, so a reconnect storm cannot grow the book without bound.
    public let capacity: Int
    private var entries: [Key: (eventID: String, closedAt: ContinuousClock.Instant)] = [:]

    public init(window: Duration, capacity: Int = 100_000) {
        self.window = window
        self.capacity = capacity
    }

    /// Remembers that the channel `key` had everything up to `eventID` when it closed at `now`.
    public mutating func remember(_ key: Key, after eventID: String, at now: ContinuousClock.Instant) {
        guard window > .zero else { return }
        if entries.count >= capacity { forget(before: now) }
        guard entries.count < capacity else { return }
        entries[key] = (eventID, now)
    }

    /// The position a rejoin of `key` at `now` continues from, taken out of the book.
    public mutating func take(_ key: Key, at now: ContinuousClock.Instant) -> String? {
        guard let entry = entries.removeValue(forKey: key), now - entry.closedAt <= window else { return nil }
        return entry.eventID
    }

    /// Drops positions older than the window.
    public mutating func forget(before now: ContinuousClock.Instant) {
        entries = entries.filter { now - $0.value.closedAt <= window }
    }

    public var count: Int { entries.count }
}
