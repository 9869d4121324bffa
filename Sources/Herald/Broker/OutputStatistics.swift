/// One output in `GET /stats` (under `outputs`, by its configuration section).
public struct OutputStatistics: Codable, Sendable, Hashable {
    /// How an output is fed.
    public enum Feed: String, Codable, Sendable, CaseIterable {
        /// A broker subscription: it loses events when it falls behind, and
        /// what is committed while the daemon is down.
        case live
        /// The journal, through a cursor of its own: nothing is lost.
        case durable
    }

    /// `ok`, or `degraded` with ``reason``.
    public var health: String
    public var reason: String?
    public var feed: Feed
    /// Events it has delivered since the daemon started.
    public var delivered: UInt64
    /// A durable output's cursor: the last event it recorded as delivered.
    public var lastEventID: String?
    /// A durable output's events still to deliver: those the broker has published since the output last caught up.
    public var backlog: Int?
    /// Frames its subscribers missed since the daemon started, where they can
    /// miss some and go on: the realtime endpoint's broadcasts and presence.
    public var missed: UInt64?

    public init(
        health: String = "ok", reason: String? = nil, feed: Feed, delivered: UInt64, lastEventID: String? = nil, backlog: Int? = nil, missed: UInt64? = nil
    ) {
        self.health = health
        self.reason = reason
        self.feed = feed
        self.delivered = delivered
        self.lastEventID = lastEventID
        self.backlog = backlog
        self.missed = missed
    }

}
