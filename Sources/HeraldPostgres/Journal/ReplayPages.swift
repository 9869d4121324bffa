public import Herald

/// Pages of journal ranges that resuming clients read, kept for a few
/// seconds so that clients replaying the same range share one read.
///
/// The resumes of one lookup batch share its snapshot, and those whose events
/// followed the same checkpoint read the same range from the same start: a
/// herd of ten thousand that missed the same events reads them once.
struct ReplayPages: Sendable {
    struct Key: Hashable, Sendable {
        var older: TransactionSnapshot
        var newer: TransactionSnapshot
        /// The position the page follows: (0, 0) for the range's start.
        var afterTransactionID: UInt64
        var afterEventID: UInt64
    }

    /// A page as it was read, with its rows' events decoded once for all its readers: in a herd
    /// of ten thousand resumes, each decoding the same rows again cost more than the rest of its turn.
    /// The rows' text is let go once decoded: kept beside the events, it held a page twice.
    struct Kept: Sendable {
        /// Each row's transaction and event id, in the page's order.
        var positions: [Position]
        /// Row by row; nil where a row is not an event this daemon can read.
        var events: [Event?]
        /// The page is the range's last.
        var isLast: Bool
        /// What the page holds in memory: its events as decoded.
        var bytes: Int

        /// How many of its rows, from the first, hold at most `bytes` of
        /// decoded events; at least one.
        func prefixCount(within bytes: Int) -> Int {
            var total = 0
            for (index, event) in events.enumerated() {
                total += event?.retainedBytes ?? 0
                if index > 0, total > bytes { return index }
            }
            return events.count
        }

        /// The decoded events of its first `count` rows hold.
        func bytes(ofFirst count: Int) -> Int {
            count == events.count ? bytes : events.prefix(count).reduce(count * MemoryLayout<Position>.stride) { $0 + ($1?.retainedBytes ?? 0) }
        }

        struct Position: Sendable {
            var transactionID: UInt64
            var id: UInt64
        }

        init(_ page: Journal.Page) {
            self.init(page: page, events: page.rows.map { try? Event(payload: $0.event) })
        }

        init(page: Journal.Page, events: [Event?]) {
            positions = page.rows.map { Position(transactionID: $0.transactionID, id: $0.id) }
            self.events = events
            isLast = page.isLast
            bytes = events.reduce(positions.count * MemoryLayout<Position>.stride) { $0 + ($1?.retainedBytes ?? 0) }
        }
    }

    private struct Entry: Sendable {
        var kept: Kept
        var storedAt: ContinuousClock.Instant
        var bytes: Int
        var rowCount: Int { kept.positions.count }
    }

    private var pages: [Key: Entry] = [:]
    /// Each range with the number of its pages kept, dropped with its last page.
    private var ranges: [JournalRangeKey: (range: JournalRange, pages: Int)] = [:]
    private var heldRows = 0
    private var heldBytes = 0

    /// How long a page is kept after it was read.
    static let lifetime: Duration = .seconds(10)
    /// Events kept at most across all pages, about 30 MB of 300-byte events as read, and their decoded events beside.
    static let rowLimit = 100_000
    /// Bytes of decoded events kept at most across all pages: a page of 500 rows of 1 MB was kept
    /// whole, and four replays of such rows left 1.3 GB behind them.
    /// Room for a page of 40 rows of 1 MB, which a herd then reads once: at 32 MiB another user's replay
    /// of the same range read it again, in its own turn (1 s, against 0.2 s shared).
    static let byteLimit = 128 << 20
    /// Whether the owner has a sweep of expired pages under way (``store(_:for:range:now:)``, ``sweep(now:)``).
    private var sweeping = false

    struct JournalRangeKey: Hashable, Sendable {
        var older: TransactionSnapshot
        var newer: TransactionSnapshot
    }

    /// The page after `key`'s position, if a reader read it lately.
    mutating func page(_ key: Key, now: ContinuousClock.Instant) -> Kept? {
        guard let entry = pages[key] else { return nil }
        guard now - entry.storedAt < Self.lifetime else {
            drop(key)
            return nil
        }
        return entry.kept
    }

    /// The range a reader of `older`–`newer` continues: shared, so that a long
    /// range lists its transactions once for all its readers.
    func range(older: TransactionSnapshot, newer: TransactionSnapshot) -> JournalRange? {
        ranges[JournalRangeKey(older: older, newer: newer)]?.range
    }

    /// Keeps `kept` for the readers after it, within the limits.
    /// - Returns: whether the owner should start a sweep of expired pages
    ///   (``sweep(now:)`` every ``lifetime``): none is under way, and pages are kept.
    @discardableResult
    mutating func store(_ kept: Kept, for key: Key, range: JournalRange, now: ContinuousClock.Instant) -> Bool {
        dropExpired(now: now)
        let bytes = kept.bytes
        if kept.positions.count <= Self.rowLimit - heldRows, bytes <= Self.byteLimit - heldBytes {
            drop(key)
            pages[key] = Entry(kept: kept, storedAt: now, bytes: bytes)
            let rangeKey = JournalRangeKey(older: key.older, newer: key.newer)
            ranges[rangeKey] = (range, (ranges[rangeKey]?.pages ?? 0) + 1)
            heldRows += kept.positions.count
            heldBytes += bytes
        }
        guard !sweeping, !pages.isEmpty else { return false }
        sweeping = true
        return true
    }

    /// Drops the pages whose lifetime has ended, when no reader comes to
    /// replace them. Returns whether pages are left, for another sweep; if
    /// none is, the next store starts one.
    mutating func sweep(now: ContinuousClock.Instant) -> Bool {
        dropExpired(now: now)
        sweeping = !pages.isEmpty
        return sweeping
    }

    /// Bytes of events kept now.
    var keptBytes: Int { heldBytes }

    private mutating func drop(_ key: Key) {
        guard let entry = pages.removeValue(forKey: key) else { return }
        heldRows -= entry.rowCount
        heldBytes -= entry.bytes
        let rangeKey = JournalRangeKey(older: key.older, newer: key.newer)
        guard let kept = ranges[rangeKey] else { return }
        ranges[rangeKey] = kept.pages > 1 ? (kept.range, kept.pages - 1) : nil
    }

    private mutating func dropExpired(now: ContinuousClock.Instant) {
        for (key, entry) in pages where now - entry.storedAt >= Self.lifetime { drop(key) }
    }
}
