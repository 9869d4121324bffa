public import Herald
public import Logging
public import ServiceLifecycle
import Synchronization

/// Keeps the journal to its retention, and measures it for `/stats`.
///
/// The journal is two tables that take turns (publisher version 11):
/// writers insert into the current one. Each run
/// - empties with TRUNCATE the other part once it stopped being current
///   more than the retention ago and every event in it is delivered: this
///   daemon's checkpoint, every webhook feed and every durable output's
///   cursor have passed it, and no webhook dispatcher holds one of its
///   events. It takes the part's lock for a moment only, and gives up
///   until the next run rather than wait behind a reader;
/// - makes the other part current once the current one has been current
///   for the retention and the other is empty.
///
/// So events stay between one and two retentions, and no row is ever
/// deleted: the journal leaves vacuum nothing to do. A part from before
/// version 11 (`journal_0`) is emptied the same way once its newest event
/// is older than the retention.
public final class JournalMaintenance: Service, Sendable {
    public struct Configuration: Sendable {
        /// How long delivered events stay in the journal at least; at most
        /// twice as long, as parts are emptied whole. Default 24 hours.
        public var retention: Duration
        /// Time between runs. Default 60 s.
        public var interval: Duration

        public init(retention: Duration = .seconds(24 * 3600), interval: Duration = .seconds(60)) {
            self.retention = retention
            self.interval = interval
        }
    }

    public let configuration: Configuration
    let daemon: String
    let listener: PostgresListener
    let logger: Logger
    private let connection: SerialConnection
    private let measured = Mutex<(statistics: DaemonStatistics.Journal, at: ContinuousClock.Instant)?>(nil)
    private let prunedTotal = Atomic<Int64>(0)

    public init(configuration: Configuration, connection: ConnectionString, daemon: String, listener: PostgresListener, logger: Logger) {
        self.configuration = configuration
        self.connection = SerialConnection(connection, applicationName: "pgherald-maintenance")
        self.daemon = daemon
        self.listener = listener
        self.logger = logger
    }

    /// The journal as last measured; `nil` in notify-only mode.
    public var statistics: DaemonStatistics.Journal? { measured.withLock { $0?.statistics } }

    /// The journal measured at most `maximumAge` ago: measured again now if
    /// the last measurement is older, so `/stats` shows rows written since the
    /// last pruning run. On a failed measurement, the last one.
    public func statistics(maximumAge: Duration) async -> DaemonStatistics.Journal? {
        guard let last = measured.withLock({ $0 }) else { return nil }
        guard ContinuousClock.now - last.at > maximumAge else { return last.statistics }
        do {
            try await measure(pruned: prunedTotal.load(ordering: .relaxed))
        } catch {
            logger.debug("cannot measure the journal", metadata: ["error": "\(error)"])
        }
        return statistics
    }

    public func run() async throws {
        guard await listener.health.waitUntilListening(), listener.health.durability == .durable else {
            // Nothing to maintain; a service that ends while the group shuts down counts as a failure.
            try? await gracefulShutdown()
            return
        }
        while true {
            await runOnce()
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: self.configuration.interval) }
            } catch {
                return
            }
        }
    }

    /// One pruning pass and measurement; returns how many events were pruned.
    @discardableResult
    public func runOnce() async -> Int {
        do {
            let pruned = try await connection.run { [self] connection throws(LibpqError) in
                try prune(on: connection)
            }
            let total = prunedTotal.add(Int64(pruned), ordering: .relaxed).newValue
            if pruned > 0 {
                logger.info("emptied a journal part", metadata: ["events": "\(pruned)", "retention": "\(configuration.retention)"])
            }
            try await measure(pruned: total)
            return pruned
        } catch {
            logger.warning("journal maintenance failed; retrying at the next run", metadata: ["error": "\(error)"])
            return 0
        }
    }

    private var retentionSeconds: Double {
        configuration.retention / .seconds(1)
    }

    /// Who still needs journal events: snapshots that must have passed an
    /// event before it goes, and events handed to webhook dispatchers.
    private struct Readers {
        var snapshots: [TransactionSnapshot]
        var handedOver: [UInt64]
    }

    private func prune(on connection: LibpqConnection) throws(LibpqError) -> Int {
        guard let checkpoint = try Journal.latestCheckpoint(of: daemon, on: connection) else { return 0 }
        let readers = try readers(besides: checkpoint.snapshot, on: connection)
        let parts = try connection.execute("""
            SELECT p.part, p.since IS NULL OR p.since < now() - make_interval(secs => $1::float8) AS due,
                   p.until < now() - make_interval(secs => $1::float8) AS expired,
                   (SELECT last_value FROM pgherald.journal_current) AS current
              FROM pgherald.journal_part p ORDER BY p.part
            """, parameters: [String(retentionSeconds)]).namedRows
        var pruned = 0
        var current = 1
        var currentDue = false
        for row in parts {
            let part: Int = try row.value("part")
            current = try row.value("current")
            if part == current {
                currentDue = try row.value("due", as: Bool.self)
            } else if try row.optional("expired") == true {
                pruned += try empty(part: part, readers: readers, on: connection)
            }
        }
        if try connection.execute("SELECT to_regclass('pgherald.journal_0') IS NOT NULL").scalar == "t",
           try connection.execute("""
               SELECT NOT EXISTS (SELECT FROM pgherald.journal_0 WHERE created_at >= now() - make_interval(secs => $1::float8))
               """, parameters: [String(retentionSeconds)]).scalar == "t" {
            pruned += try empty(part: 0, readers: readers, on: connection)
        }
        if currentDue { current = try turn(from: current, on: connection) }
        try summarizeFullRanges(on: connection)
        // Autovacuum, off for the parts, would have kept their statistics: the sweeps' plans need them.
        try connection.execute("ANALYZE pgherald.journal_\(current)")
        // A resuming client needs the last checkpoint from before its event; keep an hour's margin.
        try connection.execute("""
            DELETE FROM pgherald.checkpoint
             WHERE daemon = $1 AND taken_at < now() - make_interval(secs => $2::float8) - interval '1 hour'
               AND seq < (SELECT max(seq) FROM pgherald.checkpoint WHERE daemon = $1)
            """, parameters: [daemon, String(retentionSeconds)])
        return pruned
    }

    /// Webhook feeds read their backlog from the journal, and events handed to a
    /// dispatcher are read again if it dies before settling them; durable
    /// outputs' cursors keep what they have not read. A feed or cursor not
    /// moved for longer than the retention (its endpoint or output is gone)
    /// keeps nothing; they move each second, so a minute's grace keeps a short
    /// retention from outrunning a late one.
    private func readers(besides checkpoint: TransactionSnapshot, on connection: LibpqConnection) throws(LibpqError) -> Readers {
        var readers = Readers(snapshots: [checkpoint], handedOver: [])
        let retention = [String(retentionSeconds)]
        if try connection.execute("SELECT to_regclass('pgherald.webhook_in_flight') IS NOT NULL").scalar == "t" {
            for row in try connection.execute("SELECT DISTINCT unnest(event_ids) AS id FROM pgherald.webhook_in_flight").namedRows {
                readers.handedOver.append(try row.value("id"))
            }
            for row in try connection.execute("""
                SELECT snapshot::text FROM pgherald.webhook_feed
                 WHERE fed_at > now() - greatest(make_interval(secs => $1::float8), interval '1 minute')
                """, parameters: retention).namedRows {
                readers.snapshots.append(try row.value("snapshot"))
            }
        }
        if try connection.execute("SELECT to_regclass('pgherald.output_cursor') IS NOT NULL").scalar == "t" {
            for row in try connection.execute("""
                SELECT snapshot::text FROM pgherald.output_cursor
                 WHERE moved_at > now() - greatest(make_interval(secs => $1::float8), interval '1 minute')
                """, parameters: retention).namedRows {
                readers.snapshots.append(try row.value("snapshot"))
            }
        }
        return readers
    }

    /// Empties journal part `part` if every reader is done with it, and returns the events it held; 0 when
    /// it must wait. Counted before the lock, which a count of a large part would hold too long.
    private func empty(part: Int, readers: Readers, on connection: LibpqConnection) throws(LibpqError) -> Int {
        let table = "pgherald.journal_\(part)"
        let events: Int = try connection.execute("SELECT coalesce(sum(coalesce(event_count, 1)), 0) AS events FROM \(table)")
            .namedRows.first?.value("events") ?? 0
        guard events > 0 else { return 0 }
        return try connection.inTransaction { () throws(LibpqError) -> Int in
            try connection.execute("SET LOCAL lock_timeout = '\(Self.lockTimeoutMilliseconds)ms'")
            do throws(LibpqError) {
                try connection.execute("LOCK TABLE \(table) IN ACCESS EXCLUSIVE MODE")
            } catch where error.sqlState == "55P03" {
                logger.debug("a journal part is in use; emptying it at the next run", metadata: ["part": "\(part)"])
                return 0
            }
            // Locked, nothing can be written to it: what is checked now is what goes.
            for snapshot in readers.snapshots {
                let unread = try connection.execute("""
                    SELECT EXISTS (SELECT FROM \(table) WHERE txid >= pg_snapshot_xmin($1::pg_snapshot)
                                                        AND NOT pg_visible_in_snapshot(txid, $1::pg_snapshot))
                    """, parameters: [snapshot.description])
                if unread.scalar == "t" { return 0 }
            }
            if !readers.handedOver.isEmpty {
                let held = try connection.execute("""
                    SELECT EXISTS (SELECT FROM unnest($1::bigint[]) AS held(id)
                                     JOIN \(table) j ON \(Journal.holds("j", "held.id")))
                    """, parameters: ["{" + readers.handedOver.map(String.init).joined(separator: ",") + "}"])
                if held.scalar == "t" { return 0 }
            }
            try connection.execute("TRUNCATE \(table)")
            return events
        }
    }

    /// Makes the other part current once it is empty, and returns the current part; writers see it at their next row.
    private func turn(from current: Int, on connection: LibpqConnection) throws(LibpqError) -> Int {
        let next = current == 1 ? 2 : 1
        guard try connection.execute("SELECT NOT EXISTS (SELECT FROM pgherald.journal_\(next))").scalar == "t" else { return current }
        try connection.inTransaction { () throws(LibpqError) in
            try connection.execute("""
                UPDATE pgherald.journal_part SET until = CASE WHEN part = $1 THEN now() END,
                                                 since = CASE WHEN part = $2 THEN now() ELSE since END
                """, parameters: [String(current), String(next)])
            try connection.execute("SELECT setval('pgherald.journal_current', $1)", parameters: [String(next)])
        }
        logger.info("the journal turned to its other part", metadata: ["part": "\(next)"])
        return next
    }

    /// Summarizes the BRIN index on id of each part for every page range
    /// before the table's last: one that writes still reach would be updated
    /// by each of them, at a WAL record each, where an unsummarized one costs
    /// nothing. Ranges already summarized are passed over. The range's size is
    /// the index's own `pages_per_range` (PostgreSQL's default, 128, without one).
    private func summarizeFullRanges(on connection: LibpqConnection) throws(LibpqError) {
        try connection.execute("""
            SELECT count(brin_summarize_range(i.indexrelid::regclass, b))
              FROM pg_index i
              JOIN pg_class t ON t.oid = i.indrelid AND t.relnamespace = 'pgherald'::regnamespace AND t.relname IN ('journal_1', 'journal_2')
              JOIN pg_class x ON x.oid = i.indexrelid AND x.relam = (SELECT oid FROM pg_am WHERE amname = 'brin')
              CROSS JOIN LATERAL (SELECT coalesce((SELECT substring(o FROM '^pages_per_range=(\\d+)$')::bigint FROM unnest(x.reloptions) AS o
                                                    WHERE o LIKE 'pages_per_range=%'), 128) AS pages) AS r
              CROSS JOIN LATERAL generate_series(0, pg_relation_size(t.oid) / current_setting('block_size')::bigint - 1 - r.pages, r.pages) AS b
            """)
    }

    /// How long emptying a part waits for a reader's lock before it tries again at the next run: readers queue behind it meanwhile.
    static let lockTimeoutMilliseconds = 100

    private func measure(pruned: Int64) async throws(LibpqError) {
        let statistics = try await connection.run { [self] connection throws(LibpqError) in
            try measure(on: connection, pruned: pruned)
        }
        measured.withLock { $0 = (statistics, .now) }
    }

    /// Events are counted exactly in up to this many rows; beyond, the planner's estimate of rows stands.
    static let exactCountLimit = 100_000

    private func measure(on connection: LibpqConnection, pruned: Int64) throws(LibpqError) -> DaemonStatistics.Journal {
        let result = try connection.execute("""
            SELECT (SELECT CASE WHEN counted < \(Self.exactCountLimit) THEN events
                                ELSE greatest(events, (SELECT sum(greatest(reltuples, 0))::bigint FROM pg_class
                                                        WHERE relnamespace = 'pgherald'::regnamespace AND relkind = 'r'
                                                          AND relname ~ '^journal_[0-9]+$')) END
                      FROM (SELECT count(*) AS counted, coalesce(sum(coalesce(event_count, 1)), 0) AS events
                              FROM (SELECT event_count FROM pgherald.journal LIMIT \(Self.exactCountLimit)) AS capped) AS c) AS events,
                   (SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
                     WHERE c.relnamespace = 'pgherald'::regnamespace AND c.relkind = 'r' AND c.relname ~ '^journal_[0-9]+$') AS bytes,
                   oldest.id::text AS oldest_id,
                   to_char(oldest.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS oldest_at
              FROM (SELECT 1) AS one
              LEFT JOIN (SELECT id, created_at FROM pgherald.journal ORDER BY txid, id LIMIT 1) AS oldest ON true
            """)
        let row = result.namedRows.first
        return DaemonStatistics.Journal(
            rows: try row?.optional("events") ?? 0,
            bytes: try row?.optional("bytes") ?? 0,
            oldestAt: try row?.text("oldest_at"),
            oldestEventID: try row?.text("oldest_id"),
            pruned: pruned,
            retentionSeconds: retentionSeconds
        )
    }
}
