public import Herald

/// Queries on `pgherald.journal` and `pgherald.checkpoint`.
///
/// Catch-up selects events by transaction id against two snapshots: those
/// whose transaction is visible in the newer snapshot and not in the older
/// one. Ids alone would skip a transaction that took a lower id but
/// committed later.
public enum Journal {
    /// One event as the trigger wrote it. A journal row holds one event or,
    /// for a statement that changed many rows, a batch of them separated by
    /// U+001E; these are the events, taken apart.
    public struct Row: Sendable {
        public var transactionID: UInt64
        public var id: UInt64
        /// The event's JSON; of a batch, its part of the row's text, which it shares rather than copies.
        public var event: Substring
    }

    /// Events read from the journal, and whether the read reached the end of what it asked for.
    public struct Page: Sendable {
        public var rows: [Row]
        /// Fewer journal rows came back than the limit: nothing further matches.
        public var isLast: Bool
    }

    /// Separates the events of a batch; JSON text never contains it.
    static let batchSeparator = UInt8(0x1E)

    /// The most events a journal row holds, as the triggers batch them.
    static let eventsPerBatch = 100

    /// SQL that is true when the journal row `row` holds the event `id`: a
    /// batch starts at its first event, so the row starts at most
    /// ``eventsPerBatch`` − 1 ids before it, a range the BRIN index on id
    /// narrows to a few pages.
    static func holds(_ row: String, _ id: String) -> String {
        "\(row).id BETWEEN \(id) - \(eventsPerBatch - 1) AND \(id) AND coalesce(\(row).last_id, \(row).id) >= \(id)"
    }

    /// A daemon's last recorded progress.
    public struct Checkpoint: Sendable {
        public var snapshot: TransactionSnapshot
        /// The last event delivered before a graceful shutdown.
        public var lastEventID: UInt64?
    }

    /// What the database was installed with; `nil` before version 2 of the publisher.
    public static func installedDurability(on connection: LibpqConnection) throws(LibpqError) -> Durability? {
        // Asked apart from the call: a statement naming pgherald.durability() fails to parse without the schema.
        let installed = try connection.execute("""
            SELECT EXISTS (SELECT FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                            WHERE n.nspname = 'pgherald' AND p.proname = 'durability')
            """)
        guard installed.scalar == "t" else { return nil }
        return try connection.execute("SELECT pgherald.durability()").scalar.flatMap { Durability(rawValue: $0) }
    }

    /// The publisher version this daemon reads: version 8 notifies only while a daemon is parked (the doorbell),
    /// version 9 holds those notifications until pre-commit with the native library, so prepared transactions prepare,
    /// version 10's `park()` finishes a transaction id taken after the doorbell changed, so every writer that read
    /// the old value shows in the daemon's closing snapshot, version 11's journal is two tables that take turns,
    /// emptied whole (``JournalMaintenance``), and version 12 publishes a partition's rows under its partitioned
    /// table, whose policies judge them: a daemon over version 11 would judge them by the partition's.
    public static let requiredPublisherVersion = 12

    /// The channel the triggers notify on, which the install chose at random
    /// and only roles that may read `pgherald.setting` learn; `nil` where
    /// pgherald is not installed, or was installed before version 7.
    public static func notificationChannel(on connection: LibpqConnection) throws(LibpqError) -> String? {
        // Asked apart from the read: a statement naming pgherald.setting fails to parse without it.
        let installed = try connection.execute("SELECT to_regclass('pgherald.setting') IS NOT NULL")
        guard installed.scalar == "t" else { return nil }
        return try connection.execute("SELECT value FROM pgherald.setting WHERE name = 'channel'").scalar ?? nil
    }

    /// `pgherald.version()` of the installed publisher.
    public static func publisherVersion(on connection: LibpqConnection) throws(LibpqError) -> Int? {
        try connection.execute("SELECT pgherald.version()").scalar.flatMap { Int($0) }
    }

    public static func currentSnapshot(on connection: LibpqConnection) throws(LibpqError) -> TransactionSnapshot {
        try snapshot(connection.execute("SELECT pg_current_snapshot()::text").scalar)
    }

    /// The newest checkpoint of `daemon`, if it ever recorded one.
    public static func latestCheckpoint(of daemon: String, on connection: LibpqConnection) throws(LibpqError) -> Checkpoint? {
        let result = try connection.execute("""
            SELECT snapshot::text, last_event_id FROM pgherald.checkpoint
             WHERE daemon = $1 ORDER BY seq DESC LIMIT 1
            """, parameters: [daemon])
        guard let row = result.namedRows.first else { return nil }
        return Checkpoint(snapshot: try row.value("snapshot"), lastEventID: try row.optional("last_event_id"))
    }

    /// Records that everything visible in `snapshot` has been delivered.
    public static func saveCheckpoint(
        of daemon: String,
        _ snapshot: TransactionSnapshot,
        lastEventID: UInt64? = nil,
        on connection: LibpqConnection
    ) throws(LibpqError) {
        try connection.execute(
            "INSERT INTO pgherald.checkpoint (daemon, snapshot, last_event_id) VALUES ($1, $2::pg_snapshot, $3)",
            parameters: [daemon, snapshot.description, lastEventID.map(String.init)]
        )
    }

    /// The events committed between two snapshots, in (transaction id, event
    /// id) order, after the position `after`, from up to `limit` journal rows:
    /// the raw read under ``JournalRange``, which gives delivery order.
    ///
    /// A batch that `after` stopped inside is read again and only its events
    /// past `after` are kept. The ORDER BY names the table's columns: a bare
    /// `txid` would mean the output column `txid::text`, sorting pages as text
    /// ("1000" before "730") while `after` compares numbers, which skipped
    /// rows between pages.
    /// - Parameter byteLimit: read no further once the rows hold about this
    ///   many bytes (see ``LibpqConnection/execute(_:parameters:byteLimit:sizedBy:timeout:)``); nil: `limit` rows whatever their size.
    public static func events(
        visibleIn newer: TransactionSnapshot,
        notVisibleIn older: TransactionSnapshot,
        after: (transactionID: UInt64, id: UInt64)? = nil,
        limit: Int = 1000,
        byteLimit: Int? = nil,
        on connection: LibpqConnection
    ) throws(LibpqError) -> Page {
        let sql = """
            SELECT txid::text, id, last_id, event FROM pgherald.journal
             WHERE txid >= pg_snapshot_xmin($1::pg_snapshot) AND txid < pg_snapshot_xmax($2::pg_snapshot)
               AND pg_visible_in_snapshot(txid, $2::pg_snapshot)
               AND NOT pg_visible_in_snapshot(txid, $1::pg_snapshot)
               AND (txid, coalesce(last_id, id)) > ($3::xid8, $4::bigint)
             ORDER BY journal.txid, journal.id
             LIMIT \(limit)
            """
        let parameters = [older.description, newer.description, String(after?.transactionID ?? 0), String(after?.id ?? 0)]
        let (found, isComplete) = if byteLimit == nil {
            (try connection.execute(prepared: "pgherald_journal_page_\(limit)", sql, parameters: parameters).namedRows, true)
        } else {
            try read(sql, parameters: parameters, byteLimit: byteLimit, on: connection)
        }
        var rows = try events(found)
        if let after {
            rows.removeAll { ($0.transactionID, $0.id) <= (after.transactionID, after.id) }
        }
        return Page(rows: rows, isLast: isComplete && found.count < limit)
    }

    /// Runs a read of journal rows, bounded by `byteLimit` when there is one:
    /// the rows, and whether they are all the query had.
    private static func read(
        _ sql: String, parameters: [String?], byteLimit: Int?, on connection: LibpqConnection
    ) throws(LibpqError) -> (rows: [ResultRow], isComplete: Bool) {
        guard let byteLimit else { return (try connection.execute(sql, parameters: parameters).namedRows, true) }
        let (result, isComplete) = try connection.execute(sql, parameters: parameters, byteLimit: byteLimit, sizedBy: "event")
        return (result.namedRows, isComplete)
    }

    /// The transactions committed between two snapshots in delivery order
    /// (see ``JournalRange``): by the last event each wrote.
    static func transactions(
        visibleIn newer: TransactionSnapshot, notVisibleIn older: TransactionSnapshot, on connection: LibpqConnection
    ) throws(LibpqError) -> [JournalRange.Transaction] {
        let result = try connection.execute("""
            SELECT journal.txid::text AS txid, max(coalesce(last_id, id)) AS last_event_id, count(*) AS journal_rows
              FROM pgherald.journal
             WHERE txid >= pg_snapshot_xmin($1::pg_snapshot) AND txid < pg_snapshot_xmax($2::pg_snapshot)
               AND pg_visible_in_snapshot(txid, $2::pg_snapshot)
               AND NOT pg_visible_in_snapshot(txid, $1::pg_snapshot)
             GROUP BY journal.txid
             ORDER BY max(coalesce(last_id, id)), journal.txid
            """, parameters: [older.description, newer.description])
        var transactions: [JournalRange.Transaction] = []
        transactions.reserveCapacity(result.rows.count)
        for row in result.namedRows {
            transactions.append(JournalRange.Transaction(
                id: try row.value("txid"), lastEventID: try row.value("last_event_id"), rows: try row.value("journal_rows")
            ))
        }
        return transactions
    }

    /// The events of whole transactions, one after another in the order
    /// given, each in the order it wrote them, and whether they are all of
    /// them (a `byteLimit` can cut the read short after any journal row).
    static func events(
        transactionIDs: [UInt64], byteLimit: Int? = nil, on connection: LibpqConnection
    ) throws(LibpqError) -> (rows: [Row], isComplete: Bool) {
        guard !transactionIDs.isEmpty else { return ([], true) }
        let (found, isComplete) = try read(
            eventsOfTransactionsSQL, parameters: ["{" + transactionIDs.map(String.init).joined(separator: ",") + "}"], byteLimit: byteLimit, on: connection
        )
        return (try events(found), isComplete)
    }

    /// Reads each wanted transaction on its own (OFFSET 0 keeps the planner
    /// from turning that into a join): a join with an array it cannot see
    /// into is estimated at the journal's size over 200 rows per element,
    /// which at a million rows costs as much as JIT compilation is for.
    static let eventsOfTransactionsSQL = """
        SELECT j.txid::text AS txid, j.id, j.last_id, j.event
          FROM unnest($1::xid8[]) WITH ORDINALITY AS wanted(txid, position)
          CROSS JOIN LATERAL (SELECT txid, id, last_id, event FROM pgherald.journal WHERE txid = wanted.txid OFFSET 0) AS j
         ORDER BY wanted.position, j.id
        """

    /// The events of one transaction after its event `after`, from up to
    /// `limit` journal rows (fewer past `byteLimit`), in id order.
    static func events(
        transactionID: UInt64, after: UInt64, limit: Int, byteLimit: Int? = nil, on connection: LibpqConnection
    ) throws(LibpqError) -> [Row] {
        let (found, _) = try read("""
            SELECT txid::text, id, last_id, event FROM pgherald.journal
             WHERE txid = $1::xid8 AND coalesce(last_id, id) > $2
             ORDER BY journal.id LIMIT \(limit)
            """, parameters: [String(transactionID), String(after)], byteLimit: byteLimit, on: connection)
        return try events(found).filter { $0.id > after }
    }

    /// One page of a sweep: the events committed after `covered` and visible
    /// in `target`, or, without one, in the statement's own snapshot, which
    /// comes back with them. Later pages read with ``events(visibleIn:notVisibleIn:after:limit:on:)``.
    public static func sweep(
        after covered: TransactionSnapshot,
        upTo target: TransactionSnapshot? = nil,
        limit: Int,
        on connection: LibpqConnection
    ) throws(LibpqError) -> (snapshot: TransactionSnapshot, page: Page) {
        // pg_current_snapshot() is the statement's snapshot, the one the journal is read in.
        // Prepared, as it runs up to a thousand times a second: its plan
        // reads the (txid, id) index between the two snapshots' bounds
        // whatever their values.
        let result = try connection.execute(prepared: "pgherald_journal_sweep_\(limit)", """
            WITH target AS (SELECT coalesce($2::pg_snapshot, pg_current_snapshot()) AS s)
            SELECT j.txid::text, j.id, j.last_id, j.event, target.s::text AS snapshot
              FROM target LEFT JOIN LATERAL (
                SELECT txid, id, last_id, event FROM pgherald.journal
                 WHERE txid >= pg_snapshot_xmin($1::pg_snapshot) AND txid < pg_snapshot_xmax(target.s)
                   AND pg_visible_in_snapshot(txid, target.s)
                   AND NOT pg_visible_in_snapshot(txid, $1::pg_snapshot)
                 ORDER BY journal.txid, journal.id
                 LIMIT \(limit)
              ) AS j ON true
            """, parameters: [covered.description, target?.description])
        let rows = result.namedRows
        let snapshot = try snapshot(rows.first?.text("snapshot"))
        // The outer join answers an empty journal with one row of NULLs.
        let found = try rows.first?.text("txid") == nil ? [] : rows
        return (snapshot, Page(rows: try events(found), isLast: found.count < limit))
    }

    /// The events with the given ids, for notifications that carried only a
    /// reference and for deliveries handed over before a restart.
    public static func events(ids: [UInt64], on connection: LibpqConnection) throws(LibpqError) -> [Row] {
        guard let lowest = ids.min(), let highest = ids.max() else { return [] }
        let list = "{" + ids.map(String.init).joined(separator: ",") + "}"
        let result = try connection.execute(eventsWithIDsSQL, parameters: [
            list, String(lowest - min(lowest, UInt64(eventsPerBatch - 1))), String(highest),
        ])
        let wanted = Set(ids)
        return try events(result.namedRows).filter { wanted.contains($0.id) }
    }

    /// Bounded by the lowest and highest ids as well, which the planner sees:
    /// each wanted id alone, behind the array, is estimated at a fixed share
    /// of the journal, which at a million rows put a one-id lookup past
    /// `jit_above_cost`, compiled for 18 ms before reading for 5.
    static let eventsWithIDsSQL = """
        SELECT DISTINCT j.txid::text AS txid, j.id, j.last_id, j.event
          FROM unnest($1::bigint[]) AS wanted(id)
          JOIN pgherald.journal j ON \(holds("j", "wanted.id"))
         WHERE j.id BETWEEN $2::bigint AND $3::bigint
        """

    /// For each transaction, the snapshot of `daemon`'s last checkpoint that
    /// does not see it: a replay of its events starts there. A transaction
    /// that every checkpoint sees, or none is kept for, is left out.
    public static func checkpoints(
        of daemon: String, before transactionIDs: [UInt64], on connection: LibpqConnection
    ) throws(LibpqError) -> [UInt64: TransactionSnapshot] {
        guard !transactionIDs.isEmpty else { return [:] }
        let result = try connection.execute("""
            SELECT wanted.txid::text AS txid,
                   (SELECT snapshot::text FROM pgherald.checkpoint
                     WHERE daemon = $1 AND NOT pg_visible_in_snapshot(wanted.txid, snapshot)
                     ORDER BY seq DESC LIMIT 1) AS snapshot
              FROM unnest($2::xid8[]) AS wanted(txid)
            """, parameters: [daemon, "{" + transactionIDs.map(String.init).joined(separator: ",") + "}"])
        var found: [UInt64: TransactionSnapshot] = [:]
        for row in result.namedRows {
            guard let text = try row.text("snapshot"), let snapshot = TransactionSnapshot(text) else { continue }
            found[try row.value("txid")] = snapshot
        }
        return found
    }

    /// The snapshots of `daemon`'s graceful stops whose last delivered event is
    /// one of `eventIDs`, by that event: everything visible in such a snapshot
    /// was delivered before the event or is the event, and nothing else was.
    public static func finalCheckpoints(of daemon: String, lastEventIDs eventIDs: [UInt64], on connection: LibpqConnection) throws(LibpqError) -> [UInt64: TransactionSnapshot] {
        guard !eventIDs.isEmpty else { return [:] }
        let result = try connection.execute("""
            SELECT DISTINCT ON (last_event_id) last_event_id, snapshot::text AS snapshot FROM pgherald.checkpoint
             WHERE daemon = $1 AND last_event_id = ANY($2::bigint[])
             ORDER BY last_event_id, seq DESC
            """, parameters: [daemon, "{" + eventIDs.map(String.init).joined(separator: ",") + "}"])
        var found: [UInt64: TransactionSnapshot] = [:]
        for row in result.namedRows {
            guard let text = try row.text("snapshot"), let snapshot = TransactionSnapshot(text) else { continue }
            found[try row.value("last_event_id")] = snapshot
        }
        return found
    }

    /// The id of the last event the committed transaction `transactionID`
    /// wrote, or nil when it wrote none to the journal.
    public static func lastEventID(ofTransaction transactionID: UInt64, on connection: LibpqConnection) throws(LibpqError) -> UInt64? {
        let result = try connection.execute(
            "SELECT coalesce(last_id, id) AS last FROM pgherald.journal WHERE txid = $1::xid8 ORDER BY id DESC LIMIT 1",
            parameters: [String(transactionID)]
        )
        return try result.namedRows.first?.value("last")
    }

    /// The events one statement wrote, from `first` through `last`, in id order.
    public static func events(
        transactionID: UInt64, from first: UInt64, through last: UInt64, on connection: LibpqConnection
    ) throws(LibpqError) -> [Row] {
        let result = try connection.execute("""
            SELECT txid::text, id, last_id, event FROM pgherald.journal
             WHERE txid = $1::xid8 AND id BETWEEN $2 AND $3 ORDER BY id
            """, parameters: [String(transactionID), String(first), String(last)])
        return try events(result.namedRows)
    }

    /// Takes batches apart: each event in one carries its id first, as the trigger writes it.
    private static func events(_ found: [ResultRow]) throws(LibpqError) -> [Row] {
        var rows: [Row] = []
        rows.reserveCapacity(found.count)
        for row in found {
            let txid: UInt64 = try row.value("txid")
            let id: UInt64 = try row.value("id")
            let event: String = try row.value("event")
            guard try row.text("last_id") != nil else {
                rows.append(Row(transactionID: txid, id: id, event: event[...]))
                continue
            }
            var text = event
            let bounds = text.withUTF8(partBounds)
            let utf8 = event.utf8
            for bound in bounds {
                let part = Substring(utf8[utf8.index(utf8.startIndex, offsetBy: bound.lowerBound)..<utf8.index(utf8.startIndex, offsetBy: bound.upperBound)])
                guard let partID = leadingEventID(part) else {
                    throw LibpqError(.queryFailed, "a journal batch from event \(id) holds an event without its id first")
                }
                rows.append(Row(transactionID: txid, id: partID, event: part))
            }
        }
        return rows
    }

    /// Where each event of a batch lies in its text: the non-empty runs between separators.
    private static func partBounds(_ text: UnsafeBufferPointer<UInt8>) -> [Range<Int>] {
        var bounds: [Range<Int>] = []
        var start = 0
        for index in text.indices where text[index] == batchSeparator {
            if index > start { bounds.append(start..<index) }
            start = index + 1
        }
        if text.count > start { bounds.append(start..<text.count) }
        return bounds
    }

    /// The id of an event that begins `{"id":"<digits>"`.
    static func leadingEventID(_ event: Substring) -> UInt64? {
        let prefix = #"{"id":""#.utf8
        var utf8 = event.utf8
        guard utf8.starts(with: prefix) else { return nil }
        utf8 = utf8.dropFirst(prefix.count)
        guard let end = utf8.firstIndex(of: UInt8(ascii: "\"")) else { return nil }
        return UInt64(Substring(utf8[..<end]))
    }

    private static func snapshot(_ text: String??) throws(LibpqError) -> TransactionSnapshot {
        guard let text = text ?? nil, let snapshot = TransactionSnapshot(text) else {
            throw LibpqError(.queryFailed, "unexpected snapshot \(String(describing: text ?? nil))")
        }
        return snapshot
    }
}
