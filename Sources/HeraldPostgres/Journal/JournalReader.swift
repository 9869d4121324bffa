public import Herald

/// Reads the journal for socket clients that resume from an event older than
/// the broker's in-memory history.
public final class JournalReader: Sendable {
    /// What a resuming client missed.
    public enum Replay: Sendable {
        /// The missed events are in the journal; read them page by page.
        case journal(ReplayCursor)
        /// The position cannot be found (older than retention, or never
        /// delivered by this daemon): the client must refetch everything.
        case reset(reason: String)
    }

    /// A position in a replay, in delivery order (see ``JournalRange``).
    public struct ReplayCursor: Sendable {
        /// Live events from transactions visible in this snapshot are in the replay and must be skipped.
        public let covering: TransactionSnapshot
        let since: TransactionSnapshot
        let resumedTransactionID: UInt64
        let resumedEventID: UInt64
        var after: (transactionID: UInt64, id: UInt64)?
        var range: JournalRange
        public internal(set) var isFinished = false

        init(covering: TransactionSnapshot, since: TransactionSnapshot, resumedTransactionID: UInt64, resumedEventID: UInt64) {
            self.covering = covering
            self.since = since
            self.resumedTransactionID = resumedTransactionID
            self.resumedEventID = resumedEventID
            range = JournalRange(older: since, newer: covering)
        }
    }

    let daemon: String
    /// Journal rows read per page (a batch row holds up to 100 events).
    public let pageSize: Int
    private let connection: SerialConnection

    public init(connection: ConnectionString, daemon: String, pageSize: Int = 500) {
        self.connection = SerialConnection(connection, applicationName: "pgherald-journal")
        self.daemon = daemon
        self.pageSize = pageSize
    }

    /// Where the events that this daemon delivered, or will deliver, after
    /// event `eventID` begin.
    ///
    /// The replay starts at the last checkpoint recorded before the event's
    /// transaction committed, so nothing is skipped; events between that
    /// checkpoint and `eventID` may be repeated (with their ids).
    public func replay(after eventID: UInt64) async throws(LibpqError) -> Replay {
        try await connection.run { [daemon] connection throws(LibpqError) in
            let now = try Journal.currentSnapshot(on: connection)
            guard let transactionID = try Journal.events(ids: [eventID], on: connection).first?.transactionID else {
                return .reset(reason: "event \(eventID) is not in the journal (older than retention, or unknown)")
            }
            let since = try connection.execute("""
                SELECT snapshot::text FROM pgherald.checkpoint
                 WHERE daemon = $1 AND NOT pg_visible_in_snapshot($2::xid8, snapshot)
                 ORDER BY seq DESC LIMIT 1
                """, parameters: [daemon, String(transactionID)])
            guard let sinceText = since.scalar, let checkpoint = TransactionSnapshot(sinceText) else {
                return .reset(reason: "event \(eventID) was not delivered by this daemon")
            }
            return .journal(ReplayCursor(covering: now, since: checkpoint, resumedTransactionID: transactionID, resumedEventID: eventID))
        }
    }

    /// Whether `event` is the last its committed transaction wrote: for an
    /// event delivered before anything asked for transaction ends to be marked.
    /// True for an event sent by hand, which has no journal position.
    public func endsTransaction(_ event: Event) async throws(LibpqError) -> Bool {
        guard let transactionID = UInt64(event.transactionID), let id = UInt64(event.id) else { return true }
        let last = try await connection.run { connection throws(LibpqError) in
            try Journal.lastEventID(ofTransaction: transactionID, on: connection)
        }
        return last.map { $0 <= id } ?? true
    }

    /// The next page of a replay that `filter` matches; may be empty even
    /// before the end. Sets `isFinished` after the last page.
    public func nextPage(_ cursor: inout ReplayCursor, matching filter: EventFilter) async throws(LibpqError) -> [Event] {
        let current = cursor
        let (events, after, finished, range) = try await connection.run { [pageSize] connection throws(LibpqError) in
            var range = current.range
            let page = try range.page(after: current.after, limit: pageSize, on: connection)
            var events: [Event] = []
            for row in page.rows {
                // The resumed event's own transaction delivered its events in id order.
                if row.transactionID == current.resumedTransactionID, row.id <= current.resumedEventID { continue }
                if let event = try? Event(payload: row.event), filter.matches(event) {
                    events.append(event)
                }
            }
            return (events, page.rows.last.map { ($0.transactionID, $0.id) } ?? current.after, page.isLast, range)
        }
        cursor.range = range
        cursor.after = after
        cursor.isFinished = finished
        return events
    }
}
