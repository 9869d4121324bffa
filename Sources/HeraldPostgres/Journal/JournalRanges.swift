public import Herald

/// The journal ranges a reader that keeps a position (a durable output, a
/// webhook feed) is going through, by their snapshots: a range longer than a
/// page lists its transactions once, however many reads it takes.
public struct JournalRanges: Sendable {
    private struct Key: Hashable {
        var older: TransactionSnapshot
        var newer: TransactionSnapshot
    }

    private var open: [Key: JournalRange] = [:]
    private var used: [Key: JournalRange] = [:]

    public init() {}

    /// The next page of `range` in delivery order, after its position.
    public mutating func page(of range: FeedPosition.Range, limit: Int, on connection: LibpqConnection) throws(LibpqError) -> Journal.Page {
        let key = Key(older: range.older, newer: range.newer)
        var reading = used[key] ?? open[key] ?? JournalRange(older: range.older, newer: range.newer)
        let page = try reading.page(after: range.after.map { ($0.transactionID, $0.id) }, limit: limit, on: connection)
        used[key] = reading
        return page
    }

    /// Ends a round of reads: the ranges none of them read are dropped.
    public mutating func endRound() {
        open = used
        used = [:]
    }
}
