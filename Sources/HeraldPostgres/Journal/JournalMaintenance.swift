public import Herald
public import Logging
public import ServiceLifecycle
import Synchronization

/// Prunes delivered journal rows older than the retention, and measures the journal for `/stats`.
///
/// Deletes in small batches, each its own short transaction, in event-id
/// order, so it never holds locks for long. A row is only pruned once this
/// daemon's checkpoint shows it delivered.
public final class JournalMaintenance: Service, Sendable {
    public struct Configuration: Sendable {
        /// How long delivered events stay in the journal. Default 24 hours.
        public var retention: Duration
        /// Time between runs. Default 60 s.
        public var interval: Duration
        /// Rows per delete. Default 1000.
        public var batchSize: Int

        public init(retention: Duration = .seconds(24 * 3600), interval: Duration = .seconds(60), batchSize: Int = 1000) {
            self.retention = retention
            self.interval = interval
            self.batchSize = batchSize
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
        guard await listener.waitUntilListening(), listener.durability == .durable else {
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
                logger.info("pruned the journal", metadata: ["events": "\(pruned)", "retention": "\(configuration.retention)"])
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

    private func prune(on connection: LibpqConnection) throws(LibpqError) -> Int {
        guard let checkpoint = try Journal.latestCheckpoint(of: daemon, on: connection) else { return 0 }
        // Webhook feeds read their backlog from the journal, and events handed to a
        // dispatcher are read again if it dies before settling them. A feed not
        // fed for longer than the retention (its endpoint is gone) keeps nothing;
        // feeds are marked each second, so a minute's grace keeps a short
        // retention from outrunning a late mark.
        var handedOver: Set<UInt64> = []
        var feeds: [TransactionSnapshot] = []
        if try connection.execute("SELECT to_regclass('pgherald.webhook_in_flight') IS NOT NULL").scalar == "t" {
            for row in try connection.execute("SELECT DISTINCT unnest(event_ids) AS id FROM pgherald.webhook_in_flight").namedRows {
                handedOver.insert(try row.value("id"))
            }
            for row in try connection.execute("""
                SELECT snapshot::text FROM pgherald.webhook_feed
                 WHERE fed_at > now() - greatest(make_interval(secs => $1::float8), interval '1 minute')
                """, parameters: [String(retentionSeconds)]).namedRows {
                feeds.append(try row.value("snapshot"))
            }
        }
        // Durable outputs' cursors keep what they have not read, by the same rule.
        if try connection.execute("SELECT to_regclass('pgherald.output_cursor') IS NOT NULL").scalar == "t" {
            for row in try connection.execute("""
                SELECT snapshot::text FROM pgherald.output_cursor
                 WHERE moved_at > now() - greatest(make_interval(secs => $1::float8), interval '1 minute')
                """, parameters: [String(retentionSeconds)]).namedRows {
                feeds.append(try row.value("snapshot"))
            }
        }
        var pruned = 0
        while true {
            let oldest = try connection.execute("""
                SELECT id, txid::text, created_at < now() - make_interval(secs => $1::float8) AS expired,
                       coalesce(last_id, id) AS last_id, coalesce(event_count, 1) AS events
                  FROM pgherald.journal ORDER BY id LIMIT \(configuration.batchSize)
                """, parameters: [String(retentionSeconds)]).namedRows
            var events = 0
            var doomed: [String] = []
            for row in oldest {
                let txid: UInt64 = try row.value("txid")
                guard try row.value("expired", as: Bool.self), checkpoint.snapshot.isVisible(txid), feeds.allSatisfy({ $0.isVisible(txid) }) else { continue }
                let id: UInt64 = try row.value("id")
                let last: UInt64 = try row.value("last_id")
                // A batch stays while any id in its range is handed over.
                guard id == last ? !handedOver.contains(id) : !handedOver.contains(where: { (id...last).contains($0) }) else { continue }
                events += try row.value("events", as: Int.self)
                doomed.append(String(id))
            }
            guard !doomed.isEmpty else { break }
            try connection.execute(
                "DELETE FROM pgherald.journal WHERE id = ANY($1::bigint[])",
                parameters: ["{" + doomed.joined(separator: ",") + "}"]
            )
            pruned += events
            // Rows come in id order, which is roughly age order: past the first young row, the rest are younger.
            guard oldest.count == configuration.batchSize, try oldest.last?.value("expired", as: Bool.self) == true else { break }
        }
        // A resuming client needs the last checkpoint from before its event; keep an hour's margin.
        try connection.execute("""
            DELETE FROM pgherald.checkpoint
             WHERE daemon = $1 AND taken_at < now() - make_interval(secs => $2::float8) - interval '1 hour'
               AND seq < (SELECT max(seq) FROM pgherald.checkpoint WHERE daemon = $1)
            """, parameters: [daemon, String(retentionSeconds)])
        return pruned
    }

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
                                ELSE greatest(events, (SELECT reltuples::bigint FROM pg_class WHERE oid = 'pgherald.journal'::regclass)) END
                      FROM (SELECT count(*) AS counted, coalesce(sum(coalesce(event_count, 1)), 0) AS events
                              FROM (SELECT event_count FROM pgherald.journal LIMIT \(Self.exactCountLimit)) AS capped) AS c) AS events,
                   pg_total_relation_size('pgherald.journal') AS bytes,
                   oldest.id::text AS oldest_id,
                   to_char(oldest.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS oldest_at
              FROM (SELECT 1) AS one
              LEFT JOIN (SELECT id, created_at FROM pgherald.journal ORDER BY id LIMIT 1) AS oldest ON true
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
