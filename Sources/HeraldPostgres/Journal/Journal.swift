public import Herald

/// Queries on `pgherald.journal` and `pgherald.checkpoint`.
///
/// Catch-up selects events by transaction id against two snapshots: those
/// whose transaction is visible in the newer snapshot and not in the older
/// one. Ids alone would skip a transaction that took a lower id but
/// committed later.
public enum Journal {
    /// One journal row: an event as the trigger wrote it.
    public struct Row: Sendable {
        public var transactionID: UInt64
        public var id: UInt64
        public var event: String
    }

    /// A daemon's last recorded progress.
    public struct Checkpoint: Sendable {
        public var snapshot: TransactionSnapshot
        /// The last event delivered before a graceful shutdown.
        public var lastEventID: UInt64?
    }

    /// What the database was installed with; `nil` before version 2 of the publisher.
    public static func installedDurability(on connection: PostgresConnection) throws(PostgresError) -> Durability? {
        // Asked apart from the call: a statement naming pgherald.durability() fails to parse without the schema.
        let installed = try connection.execute("""
            SELECT EXISTS (SELECT FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                            WHERE n.nspname = 'pgherald' AND p.proname = 'durability')
            """)
        guard installed.rows.first?[0] == "t" else { return nil }
        return try connection.execute("SELECT pgherald.durability()").rows.first?[0].flatMap { Durability(rawValue: $0) }
    }

    public static func currentSnapshot(on connection: PostgresConnection) throws(PostgresError) -> TransactionSnapshot {
        try snapshot(connection.execute("SELECT pg_current_snapshot()::text").rows.first?[0])
    }

    /// The newest checkpoint of `daemon`, if it ever recorded one.
    public static func latestCheckpoint(of daemon: String, on connection: PostgresConnection) throws(PostgresError) -> Checkpoint? {
        let result = try connection.execute("""
            SELECT snapshot::text, last_event_id FROM pgherald.checkpoint
             WHERE daemon = $1 ORDER BY seq DESC LIMIT 1
            """, parameters: [daemon])
        guard let row = result.rows.first else { return nil }
        return Checkpoint(snapshot: try snapshot(row[0]), lastEventID: row[1].flatMap { UInt64($0) })
    }

    /// Records that everything visible in `snapshot` has been delivered.
    public static func saveCheckpoint(
        of daemon: String,
        _ snapshot: TransactionSnapshot,
        lastEventID: UInt64? = nil,
        on connection: PostgresConnection
    ) throws(PostgresError) {
        try connection.execute(
            "INSERT INTO pgherald.checkpoint (daemon, snapshot, last_event_id) VALUES ($1, $2::pg_snapshot, $3)",
            parameters: [daemon, snapshot.description, lastEventID.map(String.init)]
        )
    }

    /// Up to `limit` events committed between two snapshots, in (transaction id, event id)
    /// order, after the position `after`.
    ///
    /// The ORDER BY names the table's columns: a bare `txid` would mean the
    /// output column `txid::text`, sorting pages as text ("1000" before "730")
    /// while `after` compares numbers, which skipped rows between pages.
    public static func events(
        visibleIn newer: TransactionSnapshot,
        notVisibleIn older: TransactionSnapshot,
        after: (transactionID: UInt64, id: UInt64)? = nil,
        limit: Int = 1000,
        on connection: PostgresConnection
    ) throws(PostgresError) -> [Row] {
        let result = try connection.execute("""
            SELECT txid::text, id, event FROM pgherald.journal
             WHERE txid >= pg_snapshot_xmin($1::pg_snapshot) AND txid < pg_snapshot_xmax($2::pg_snapshot)
               AND pg_visible_in_snapshot(txid, $2::pg_snapshot)
               AND NOT pg_visible_in_snapshot(txid, $1::pg_snapshot)
               AND (txid, id) > ($3::xid8, $4::bigint)
             ORDER BY journal.txid, journal.id
             LIMIT \(limit)
            """, parameters: [
                older.description, newer.description,
                String(after?.transactionID ?? 0), String(after?.id ?? 0),
            ])
        return try rows(result)
    }

    /// The events with the given ids, for notifications that carried only a reference.
    public static func events(ids: [UInt64], on connection: PostgresConnection) throws(PostgresError) -> [Row] {
        let list = "{" + ids.map(String.init).joined(separator: ",") + "}"
        let result = try connection.execute(
            "SELECT txid::text, id, event FROM pgherald.journal WHERE id = ANY($1::bigint[])",
            parameters: [list]
        )
        return try rows(result)
    }

    private static func rows(_ result: PostgresConnection.QueryResult) throws(PostgresError) -> [Row] {
        var rows: [Row] = []
        rows.reserveCapacity(result.rows.count)
        for row in result.rows {
            guard let txid = row[0].flatMap({ UInt64($0) }), let id = row[1].flatMap({ UInt64($0) }), let event = row[2] else {
                throw PostgresError(.queryFailed, "unexpected journal row")
            }
            rows.append(Row(transactionID: txid, id: id, event: event))
        }
        return rows
    }

    private static func snapshot(_ text: String??) throws(PostgresError) -> TransactionSnapshot {
        guard let text = text ?? nil, let snapshot = TransactionSnapshot(text) else {
            throw PostgresError(.queryFailed, "unexpected snapshot \(String(describing: text ?? nil))")
        }
        return snapshot
    }
}
