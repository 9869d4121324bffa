import Crypto
import Foundation
/// Where realtime channels stopped when their sockets dropped, so that the
/// same caller rejoining the same topic with the same bindings soon after
/// gets what it missed.
///
/// Supabase clients send no position when they rejoin, so the daemon keeps
/// one for them. A rejoin that matches takes the position; two sockets of
/// the same caller on the same topic share it, so one may receive events the
/// other missed. A position older than ``window`` is forgotten: as the book
/// is used, not only once it is full.
public struct ResumeBook: Sendable {
    /// What a rejoin must repeat to continue a channel.
    public struct Key: Sendable, Hashable {
        public var caller: String
        public var topic: String
        /// SHA-256 of the bindings as sent, without ids, in hex: a rejoin
        /// repeats them exactly, and a book of 100,000 positions holds 64
        /// bytes of each, whatever filters a client wrote.
        public var bindings: String

        public init(caller: String, topic: String, bindings: [RealtimeBinding]) {
            self.caller = caller
            self.topic = topic
            let text = bindings.map { binding in
                var echo = binding.echo
                echo["id"] = nil
                return echo.jsonText
            }.joined(separator: "\u{1E}")
            self.bindings = SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
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
    /// Keys in the order they were remembered, oldest first, so that what
    /// expired is dropped from the front; a key remembered again, or taken,
    /// leaves a stale mark here that is skipped.
    private var order: [(key: Key, closedAt: ContinuousClock.Instant)] = []
    private var orderStart = 0

    public init(window: Duration, capacity: Int = 100_000) {
        self.window = window
        self.capacity = capacity
    }

    /// Remembers that the channel `key` had everything up to `eventID` when it closed at `now`.
    public mutating func remember(_ key: Key, after eventID: String, at now: ContinuousClock.Instant) {
        guard window > .zero else { return }
        forget(before: now)
        guard entries.count < capacity || entries[key] != nil else { return }
        entries[key] = (eventID, now)
        order.append((key, now))
        // Channels that close and rejoin over and over leave stale marks: past twice the capacity, only live ones stay.
        if order.count - orderStart > 2 * capacity {
            order = entries.map { ($0.key, $0.value.closedAt) }.sorted { $0.closedAt < $1.closedAt }
            orderStart = 0
        }
    }

    /// The position a rejoin of `key` at `now` continues from, taken out of the book.
    public mutating func take(_ key: Key, at now: ContinuousClock.Instant) -> String? {
        forget(before: now)
        guard let entry = entries.removeValue(forKey: key), now - entry.closedAt <= window else { return nil }
        return entry.eventID
    }

    /// Drops positions older than the window, oldest first: each is looked at once.
    public mutating func forget(before now: ContinuousClock.Instant) {
        while orderStart < order.count, now - order[orderStart].closedAt > window {
            let mark = order[orderStart]
            if entries[mark.key]?.closedAt == mark.closedAt { entries.removeValue(forKey: mark.key) }
            orderStart += 1
        }
        // The dropped front is given back once it is half of the array, so each mark is moved at most once more.
        if orderStart > 1024, orderStart * 2 > order.count {
            order.removeFirst(orderStart)
            orderStart = 0
        }
        if entries.isEmpty {
            order.removeAll(keepingCapacity: false)
            orderStart = 0
        }
    }

    public var count: Int { entries.count }
}
