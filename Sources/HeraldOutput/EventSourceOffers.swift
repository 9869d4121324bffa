/// What an ``EventSource`` offers the outputs and the daemon around it.
public struct EventSourceOffers: OptionSet, Sendable, Hashable {
    /// One bit for each offer below.
    public let rawValue: UInt8

    /// The offers whose bits `rawValue` sets.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The events are this database's journal: the daemon maintains it
    /// (`JournalMaintenance`), and reads it for resumes older than the
    /// broker's history.
    public static let journal = EventSourceOffers(rawValue: 1 << 0)
    /// An output may read the journal through a cursor of its own
    /// (``JournalFeed``), and so lose nothing across restarts.
    public static let durableFeeds = EventSourceOffers(rawValue: 1 << 1)
    /// The source numbers its events itself, alike on every daemon that
    /// reads it (a stream's sequence), and the broker's change count follows.
    public static let changeCount = EventSourceOffers(rawValue: 1 << 2)
}
