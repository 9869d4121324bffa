import Herald

extension PostgresListener {
    /// How far a feed from elsewhere has read: on an edge, the stream's feed
    /// takes the listener's place, and the listener, which then never runs,
    /// holds the state the feed reports for health checks and statistics.
    public struct FeedFreshness: Sendable, Hashable {
        /// Where the events come from, such as `nats stream PGHERALD`.
        public var source: String
        /// The last position read (a stream sequence).
        public var position: UInt64?
        /// Positions the source holds past it.
        public var lag: UInt64?

        public init(source: String, position: UInt64?, lag: UInt64?) {
            self.source = source
            self.position = position
            self.lag = lag
        }
    }

    /// A feed from elsewhere starts in the listener's place. Its events were
    /// durable where they came from: whole transactions and exact resumes hold.
    public func beginFeed() {
        state.withLock { $0.durability = .durable }
    }

    /// The state of the feed that takes the listener's place, and how far it
    /// has read; each report also shows that the feed is not stuck.
    public func reportFeed(_ status: Status, freshness: FeedFreshness) {
        recordProgress()
        let changed = state.withLock { state in
            state.feedFreshness = freshness
            return state.status != status
        }
        if changed { setStatus(status) }
    }

    /// How far the feed from elsewhere has read; nil for a listener of this database.
    public var feedFreshness: FeedFreshness? { state.withLock { $0.feedFreshness } }
}
