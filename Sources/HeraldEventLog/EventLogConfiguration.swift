public import Herald

/// Settings of the event log: every event as one JSON line, appended to a file.
public struct EventLogConfiguration: Sendable, Hashable {
    /// When written lines are forced to disk.
    public enum Sync: String, Sendable, CaseIterable {
        /// After every write: nothing acknowledged is lost in a power cut, at the cost of an fsync per batch.
        case every
        /// At most every ``EventLogConfiguration/syncInterval``: a power cut loses at most that much.
        case interval
        /// Never by pgherald; the kernel writes back when it likes.
        case none
    }

    /// The file. Rotated files get `.1`, `.2`, … appended.
    public var path: String
    /// Default ``Sync/interval``.
    public var sync: Sync
    /// Default 1 s.
    public var syncInterval: Duration
    /// Rotate before a write would take the file past this many bytes; nil (the default) never rotates.
    public var maximumSize: Int64?
    /// Rotated files kept (`.1` … `.keep`); older ones are removed. Default 5.
    public var keep: Int
    /// Where its events come from. Default ``OutputStatistics/Feed/durable``,
    /// which needs a durable install.
    public var feed: OutputStatistics.Feed
    /// Whether `feed` was set rather than defaulted. A durable feed that was
    /// set fails on an install without a journal; the default falls back to
    /// live there, and says so.
    public var feedIsSet: Bool
    /// Live feed only: events the log may fall behind (a slow or full disk)
    /// before it drops its backlog, logs how many events were lost and
    /// carries on. Default 65,536.
    public var mailboxCapacity: Int

    public init(
        path: String,
        sync: Sync = .interval,
        syncInterval: Duration = .seconds(1),
        maximumSize: Int64? = nil,
        keep: Int = 5,
        feed: OutputStatistics.Feed = .durable,
        feedIsSet: Bool = false,
        mailboxCapacity: Int = 65_536
    ) {
        self.feed = feed
        self.feedIsSet = feedIsSet
        self.path = path
        self.sync = sync
        self.syncInterval = syncInterval
        self.maximumSize = maximumSize
        self.keep = keep
        self.mailboxCapacity = mailboxCapacity
    }
}
