public import Herald

/// Reads the journal for socket clients that resume from an event older than
/// the broker's in-memory history.
public final class JournalReader: Sendable {
    /// What a resuming client missed.
    public enum Replay: Sendable {
        /// The missed events in (transaction id, event id) order. Live events
        /// from transactions visible in `covering` are among them and must be skipped.
        case events([Event], covering: TransactionSnapshot)
        /// The position cannot be found (older than retention, or never
        /// delivered by this daemon): the client must refetch everything.
        case reset(reason: String)
    }

    let daemon: String
    /// The most events one replay returns; a client further behind gets a reset.
    public let replayLimit: Int
    private let connection: SerialConnection

    public init(connection: ConnectionString, daemon: String, replayLimit: Int = 100_000) {
        self.connection = SerialConnection(connection, applicationName: "pgherald-journal")
        self.daemon = daemon
        self.replayLimit = replayLimit
    }

    /// The events that this daemon delivered, or will deliver, after event
    /// `eventID`, matching `filter`.
    ///
    /// Replays from the last checkpoint recorded before the event's
    /// transaction committed, so nothing is skipped; events between that
    /// checkpoint and `eventID` may be repeated (with their ids).
    public func replay(after eventID: UInt64, matching filter: EventFilter) async throws(PostgresError) -> Replay {
        try await connection.run { [daemon, replayLimit] connection throws(PostgresError) in
            let now = try Journal.currentSnapshot(on: connection)
            let target = try connection.execute("SELECT txid::text FROM pgherald.journal WHERE id = $1", parameters: [String(eventID)])
            guard let transactionID = target.rows.first?[0].flatMap({ UInt64($0) }) else {
                return .reset(reason: "event \(eventID) is not in the journal (older than retention, or unknown)")
            }
            let since = try connection.execute("""
                SELECT snapshot::text FROM pgherald.checkpoint
                 WHERE daemon = $1 AND NOT pg_visible_in_snapshot($2::xid8, snapshot)
                 ORDER BY seq DESC LIMIT 1
                """, parameters: [daemon, String(transactionID)])
            guard let sinceText = since.rows.first?[0], let checkpoint = TransactionSnapshot(sinceText ?? "") else {
                return .reset(reason: "event \(eventID) was not delivered by this daemon")
            }
            var events: [Event] = []
            var after: (transactionID: UInt64, id: UInt64)?
            var rows: [Journal.Row]
            var replayed = 0
            repeat {
                rows = try Journal.events(visibleIn: now, notVisibleIn: checkpoint, after: after, limit: 1000, on: connection)
                for row in rows {
                    after = (row.transactionID, row.id)
                    // The resumed event's own transaction delivered its events in id order.
                    if row.transactionID == transactionID, row.id <= eventID { continue }
                    replayed += 1
                    guard replayed <= replayLimit else {
                        return .reset(reason: "more than \(replayLimit) events were missed")
                    }
                    if let event = try? Event(payload: row.event), filter.matches(event) {
                        events.append(event)
                    }
                }
            } while rows.count == 1000
            return .events(events, covering: now)
        }
    }
}
