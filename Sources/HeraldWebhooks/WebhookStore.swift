import Foundation
public import Herald
public import HeraldPostgres
import Synchronization

/// Webhook state in the `pgherald` schema: feeding, leasing, completing and
/// the dead letters. Every method is one statement or one transaction, so a
/// daemon killed at any point leaves the tables consistent.
public final class WebhookStore: Sendable {
    let connection: SerialConnection
    /// Leases are taken under this name (the daemon's `--name`).
    public let daemon: String
    /// The journal ranges the feeds are reading. Used only on the connection's queue.
    private let openRanges = Mutex(JournalRanges())

    public init(connection: ConnectionString, daemon: String, applicationName: String = "pgherald-webhooks") {
        self.connection = SerialConnection(connection, applicationName: applicationName)
        self.daemon = daemon
    }

    /// Fails with a message that says what to run when the database has no webhook tables.
    public func checkInstalled() async throws(LibpqError) {
        let installed = try await connection.run { connection throws(LibpqError) in
            try connection.execute("SELECT to_regclass('pgherald.webhook_in_flight') IS NOT NULL").scalar == "t"
        }
        guard installed else {
            throw LibpqError(.queryFailed, "the database has no webhook tables (pgherald.webhook_in_flight); run `pgherald install` to upgrade the publisher to version 4")
        }
    }

    /// An endpoint whose feed a running daemon on the database fills under another definition.
    public struct DefinitionConflict: Error, CustomStringConvertible {
        public var endpoint: String
        public var ours: String
        public var theirs: String
        public var definedBy: String

        public var description: String {
            "webhooks.\(endpoint): the daemon named '\(definedBy)' on this database feeds an endpoint of this name as "
                + "\(theirs), and this one is \(ours); every daemon shares an endpoint's feed by name, so give this endpoint "
                + "the same url, table, op and where, or another name"
        }
    }

    /// What ``startFeeds(_:)`` found of the feeds' definitions.
    public struct FeedClaims: Sendable {
        /// Endpoints whose feed held another definition, set by this daemon before or by one no longer running: now ours.
        public var redefined: [(endpoint: String, before: String)] = []
        /// The database has no `webhook_feed.definition` (installed before it): definitions are not compared.
        public var unchecked = false
    }

    /// Starts feeding each endpoint that has no feed yet from now on, and
    /// claims each feed's definition; events committed before its first start
    /// are not sent to it.
    /// - Throws: ``DefinitionConflict`` when another running daemon feeds an endpoint of the same name differently.
    @discardableResult
    public func startFeeds(_ endpoints: [WebhookEndpoint]) async throws -> FeedClaims {
        let names = Self.array(endpoints.map(\.name))
        let definitions = Dictionary(endpoints.map { ($0.name, $0.feedDefinition) }, uniquingKeysWith: { first, _ in first })
        let outcome = try await connection.run { [daemon] connection throws(LibpqError) -> Result<FeedClaims, DefinitionConflict> in
            let checked = try connection.execute("""
                SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'pgherald.webhook_feed'::regclass
                                AND attname = 'definition' AND NOT attisdropped)
                """).scalar == "t"
            guard checked else {
                try connection.execute("""
                    INSERT INTO pgherald.webhook_feed (endpoint, snapshot)
                    SELECT name, pg_current_snapshot() FROM unnest($1::text[]) name
                    ON CONFLICT (endpoint) DO NOTHING
                    """, parameters: [names])
                return .success(FeedClaims(unchecked: true))
            }
            return try connection.inTransaction { () throws(LibpqError) -> Result<FeedClaims, DefinitionConflict> in
                try connection.execute("""
                    INSERT INTO pgherald.webhook_feed (endpoint, snapshot, definition, defined_by)
                    SELECT name, pg_current_snapshot(), definition, $3 FROM unnest($1::text[], $2::text[]) AS e(name, definition)
                    ON CONFLICT (endpoint) DO NOTHING
                    """, parameters: [names, Self.array(endpoints.map(\.feedDefinition)), daemon])
                // Locked, so that two daemons starting together cannot both claim a feed.
                let rows = try connection.execute("""
                    SELECT f.endpoint, f.definition, f.defined_by,
                           EXISTS (SELECT FROM pgherald.daemon d JOIN pg_stat_activity a ON a.pid = d.backend_pid
                                    WHERE d.name = f.defined_by) AS running
                      FROM pgherald.webhook_feed f WHERE f.endpoint = ANY($1::text[]) ORDER BY f.endpoint FOR UPDATE OF f
                    """, parameters: [names]).namedRows
                var changed: [(endpoint: String, before: String?)] = []
                for row in rows {
                    let endpoint: String = try row.value("endpoint")
                    guard let ours = definitions[endpoint] else { continue }
                    let theirs = try row.text("definition")
                    guard theirs != ours else { continue }
                    // Another daemon that runs keeps its definition; one's own earlier definition, or a stopped daemon's, gives way.
                    if let theirs, let definedBy = try row.text("defined_by"), definedBy != daemon, try row.value("running") as Bool {
                        return .failure(DefinitionConflict(endpoint: endpoint, ours: ours, theirs: theirs, definedBy: definedBy))
                    }
                    changed.append((endpoint, theirs))
                }
                var claims = FeedClaims()
                for (endpoint, before) in changed {
                    try connection.execute(
                        "UPDATE pgherald.webhook_feed SET definition = $2, defined_by = $3 WHERE endpoint = $1",
                        parameters: [endpoint, definitions[endpoint], daemon]
                    )
                    if let before { claims.redefined.append((endpoint, before)) }
                }
                return .success(claims)
            }
        }
        return try outcome.get()
    }

    /// Marks these feeds as served now (`fed_at`), whether or not they were fed.
    public func markFeedsAlive(_ endpoints: [String]) async throws(LibpqError) {
        guard !endpoints.isEmpty else { return }
        _ = try await connection.run { connection throws(LibpqError) in
            try connection.execute(
                "UPDATE pgherald.webhook_feed SET fed_at = now() WHERE endpoint = ANY($1::text[])",
                parameters: [Self.array(endpoints)]
            )
        }
    }

    /// Deliveries this daemon name leased before it last stopped (it was killed
    /// mid-flight) become due now instead of when their lease runs out.
    @discardableResult
    public func releaseLeases() async throws(LibpqError) -> Int {
        try await connection.run { [daemon] connection throws(LibpqError) in
            try connection.execute("""
                UPDATE pgherald.webhook_delivery SET leased_by = NULL, next_attempt_at = now()
                 WHERE leased_by = $1 AND next_attempt_at > now()
                """, parameters: [daemon]).affectedRows ?? 0
        }
    }

    /// What one feeding round did.
    public struct Feed: Sendable {
        /// Endpoints that got new rows in `pgherald.webhook_delivery`.
        public var queued: Set<String> = []
        /// Deliveries handed straight to this daemon, by endpoint, in feeding order.
        public var handedOver: [String: [PendingDelivery]] = [:]
        /// Endpoints whose events still wait in the journal for room.
        public var heldBack: Set<String> = []
    }

    /// Journal pages one endpoint may read in one round while handing over,
    /// so that a narrow filter over a long backlog does not hold the round.
    static let pagesPerHandOver = 8

    /// Feeds the journal's events to each endpoint whose filter matches them,
    /// from where its feed stopped, and moves the feeds on: all in one
    /// transaction, so each event is fed once to each endpoint however many
    /// daemons feed. Endpoints another daemon is feeding right now are
    /// skipped; that daemon feeds their events.
    ///
    /// An endpoint named in `room` gets up to that many events handed over:
    /// their ids go into this daemon's `webhook_in_flight` row and they are
    /// returned to be sent at once, with no row of their own; the rest wait in
    /// the journal for the next round. Every other endpoint gets all its
    /// events queued as rows.
    public func feedFromJournal(
        _ endpoints: [WebhookEndpoint],
        room: [String: Int] = [:],
        pageSize: Int = 1000
    ) async throws(LibpqError) -> Feed {
        guard !endpoints.isEmpty else { return Feed() }
        return try await connection.run { [daemon] connection throws(LibpqError) in
            try connection.inTransaction { () throws(LibpqError) -> Feed in
                let locked = try connection.execute("""
                    SELECT endpoint, snapshot::text, target::text, after_txid::text, after_id::text FROM pgherald.webhook_feed
                     WHERE endpoint = ANY($1::text[]) FOR UPDATE SKIP LOCKED
                    """, parameters: [Self.array(endpoints.map(\.name))])
                guard !locked.rows.isEmpty else { return Feed() }
                let now = try Journal.currentSnapshot(on: connection)
                var ranges = self.openRanges.withLock { $0 }
                // A handed-over event is as old as its write, so that `max_age` counts time spent waiting in the journal.
                let wallClock = Int64(Date().timeIntervalSince1970 * 1e9)
                let byName = Dictionary(endpoints.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
                var positions: [String: FeedPosition] = [:]
                for row in locked.namedRows {
                    let name: String = try row.value("endpoint")
                    guard byName[name] != nil else { continue }
                    positions[name] = try FeedPosition(row: row)
                }
                // Endpoints that queue rows and stand at the same place read the journal once;
                // each endpoint that hands over reads on its own, as far as its room goes.
                var groups: [FeedPosition: [WebhookEndpoint]] = [:]
                var feed = Feed()
                var handedOver: (names: [String], ids: [String], leases: [String]) = ([], [], [])
                for (name, position) in positions {
                    guard let endpoint = byName[name] else { continue }
                    guard var left = room[name] else {
                        groups[position, default: []].append(endpoint)
                        continue
                    }
                    var position = position
                    var pages = 0
                    while left > 0, pages < Self.pagesPerHandOver, let range = position.nextRange(now: now) {
                        pages += 1
                        let limit = min(pageSize, max(2 * left, 64))
                        let page = try ranges.page(of: range, limit: limit, on: connection)
                        var last: FeedPosition.Row?
                        var consumedAll = true
                        for row in page.rows {
                            guard left > 0 else {
                                consumedAll = false
                                break
                            }
                            last = FeedPosition.Row(transactionID: row.transactionID, id: row.id)
                            guard let event = try? Event(payload: row.event), endpoint.filter.matches(event) else { continue }
                            left -= 1
                            handedOver.names.append(name)
                            handedOver.ids.append(String(row.id))
                            handedOver.leases.append(String(endpoint.lease / .seconds(1)))
                            feed.handedOver[name, default: []].append(PendingDelivery(
                                source: .handedOver, eventID: String(row.id), body: Array(event.jsonText.utf8), attempts: 1,
                                age: event.age(now: wallClock) ?? .zero
                            ))
                        }
                        position.fed(through: last, rangeDone: consumedAll && page.isLast)
                    }
                    if position.isBehind(now) { feed.heldBack.insert(name) }
                    positions[name] = position
                }
                for (start, group) in groups {
                    var position = start
                    while let range = position.nextRange(now: now) {
                        let page = try ranges.page(of: range, limit: pageSize, on: connection)
                        var queued: (names: [String], ids: [String], bodies: [String]) = ([], [], [])
                        for row in page.rows {
                            guard let event = try? Event(payload: row.event) else { continue }
                            let matching = group.filter { $0.filter.matches(event) }
                            guard !matching.isEmpty else { continue }
                            // Encoded once, however many endpoints get it.
                            let body = event.jsonText
                            for endpoint in matching {
                                queued.names.append(endpoint.name)
                                queued.ids.append(String(row.id))
                                queued.bodies.append(body)
                                feed.queued.insert(endpoint.name)
                            }
                        }
                        if !queued.names.isEmpty { try Self.insert(names: queued.names, ids: queued.ids, bodies: queued.bodies, on: connection) }
                        let last = page.rows.last.map { FeedPosition.Row(transactionID: $0.transactionID, id: $0.id) }
                        position.fed(through: last, rangeDone: page.isLast)
                    }
                    for endpoint in group { positions[endpoint.name] = position }
                }
                if !handedOver.names.isEmpty {
                    try connection.execute("""
                        INSERT INTO pgherald.webhook_in_flight AS f (endpoint, daemon, event_ids, lease_until)
                        SELECT u.endpoint, $4, array_agg(u.id ORDER BY u.position), now() + make_interval(secs => max(u.lease))
                          FROM unnest($1::text[], $2::bigint[], $3::float8[]) WITH ORDINALITY u(endpoint, id, lease, position)
                         GROUP BY u.endpoint
                        ON CONFLICT (endpoint, daemon) DO UPDATE
                           SET event_ids = f.event_ids || excluded.event_ids, lease_until = excluded.lease_until
                        """, parameters: [Self.array(handedOver.names), Self.array(handedOver.ids), Self.array(handedOver.leases), daemon])
                }
                let names = Array(positions.keys)
                let saved = names.map { positions[$0]! }
                try connection.execute("""
                    UPDATE pgherald.webhook_feed f
                       SET snapshot = u.snapshot::pg_snapshot, target = u.target::pg_snapshot,
                           after_txid = u.after_txid::xid8, after_id = u.after_id, fed_at = now()
                      FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[]) u(endpoint, snapshot, target, after_txid, after_id)
                     WHERE f.endpoint = u.endpoint
                    """, parameters: [
                        Self.array(names), Self.array(saved.map(\.snapshot.description)), Self.array(saved.map { $0.target?.description }),
                        Self.array(saved.map { $0.after.map { String($0.transactionID) } }), Self.array(saved.map { $0.after.map { String($0.id) } }),
                    ])
                ranges.endRound()
                self.openRanges.withLock { $0 = ranges }
                return feed
            }
        }
    }

    /// Queues live events (notify-only mode, where there is no journal to feed from).
    public func queue(_ deliveries: [(endpoint: String, event: Event)]) async throws(LibpqError) {
        guard !deliveries.isEmpty else { return }
        try await connection.run { connection throws(LibpqError) in
            try Self.insert(
                names: deliveries.map(\.endpoint), ids: deliveries.map(\.event.id), bodies: deliveries.map(\.event.jsonText),
                on: connection
            )
        }
    }

    private static func insert(names: [String], ids: [String], bodies: [String], on connection: LibpqConnection) throws(LibpqError) {
        try connection.execute("""
            INSERT INTO pgherald.webhook_delivery (endpoint, event_id, body)
            SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[])
            ON CONFLICT (endpoint, event_id) DO NOTHING
            """, parameters: [array(names), array(ids), array(bodies)])
    }

    /// Leases up to `limit` due deliveries of `endpoint` for one attempt each.
    ///
    /// Unordered endpoints take due rows that no other daemon is leasing
    /// (`FOR UPDATE SKIP LOCKED`). Ordered ones take only the oldest row, and
    /// only once it is due, so nothing overtakes an event being retried.
    public func lease(_ endpoint: WebhookEndpoint, limit: Int) async throws(LibpqError) -> [PendingDelivery] {
        let candidates = endpoint.ordered
            ? """
              SELECT seq FROM (SELECT seq, next_attempt_at FROM pgherald.webhook_delivery
                                WHERE endpoint = $1 ORDER BY seq LIMIT 1 FOR UPDATE) head
               WHERE next_attempt_at <= now()
              """
            : """
              SELECT seq FROM pgherald.webhook_delivery
               WHERE endpoint = $1 AND next_attempt_at <= now()
               ORDER BY next_attempt_at, seq LIMIT $4 FOR UPDATE SKIP LOCKED
              """
        // Materialized: a subquery joined in place may be scanned again, and
        // with SKIP LOCKED a second scan can add rows past the limit.
        let sql = """
            WITH c AS MATERIALIZED (\(candidates))
            UPDATE pgherald.webhook_delivery d
               SET leased_by = $2, attempts = d.attempts + 1, last_attempt_at = now(),
                   next_attempt_at = now() + make_interval(secs => $3::float8)
              FROM c
             WHERE d.seq = c.seq
            RETURNING d.seq, d.event_id, d.attempts, extract(epoch FROM now() - d.created_at)::float8 AS age_seconds, d.body
            """
        var parameters: [String?] = [endpoint.name, daemon, String(endpoint.lease / .seconds(1))]
        if !endpoint.ordered { parameters.append(String(limit)) }
        let result = try await connection.run { [parameters] connection throws(LibpqError) in
            try connection.execute(sql, parameters: parameters)
        }
        return try result.decode(LeasedDelivery.self).sorted { $0.seq < $1.seq }.map(\.delivery)
    }

    /// Writes back one endpoint's outcomes: delivered rows go, retries wait,
    /// failures move to the dead letters, and settled handed-over events leave
    /// this daemon's `webhook_in_flight` row. Rows whose lease this daemon lost
    /// (it ran out and another daemon took them) are left to that daemon.
    ///
    /// A handed-over event that was not delivered first becomes a row leased
    /// by this daemon, and is then retried or dead-lettered like any row, in
    /// the transaction that takes its id out of the in-flight row: it is
    /// queued before its id goes, never after.
    public func complete(_ completions: [CompletedDelivery], endpoint: WebhookEndpoint) async throws(LibpqError) {
        guard !completions.isEmpty else { return }
        let handedOver = completions.filter { $0.delivery.source == .handedOver }
        let undelivered = handedOver.filter { $0.decision != .done }
        let queued = completions.filter { $0.delivery.source != .handedOver }
        try await connection.run { [daemon] connection throws(LibpqError) in
            guard !handedOver.isEmpty else { return try Self.writeBack(queued, daemon: daemon, on: connection) }
            let settle = { () throws(LibpqError) in
                _ = try connection.execute("""
                    UPDATE pgherald.webhook_in_flight
                       SET event_ids = ARRAY(SELECT id FROM unnest(event_ids) id WHERE id <> ALL($3::bigint[])),
                           lease_until = now() + make_interval(secs => $4::float8)
                     WHERE endpoint = $1 AND daemon = $2
                    """, parameters: [
                        endpoint.name, daemon, Self.array(handedOver.map(\.delivery.eventID)), String(endpoint.lease / .seconds(1)),
                    ])
            }
            // Delivered events only: one statement each is enough.
            guard !undelivered.isEmpty else {
                try Self.writeBack(queued, daemon: daemon, on: connection)
                return try settle()
            }
            try connection.inTransaction { () throws(LibpqError) in
                let rows = try Self.queueLeased(undelivered, endpoint: endpoint, daemon: daemon, on: connection)
                try Self.writeBack(queued + rows, daemon: daemon, on: connection)
                try settle()
            }
        }
    }

    /// Inserts handed-over deliveries as rows leased by `daemon`, and returns
    /// their completions as completions of those rows. One that already has a
    /// row (another daemon queued it again) is left to that row.
    private static func queueLeased(
        _ completions: [CompletedDelivery], endpoint: WebhookEndpoint, daemon: String, on connection: LibpqConnection
    ) throws(LibpqError) -> [CompletedDelivery] {
        let deliveries = completions.map(\.delivery)
        let inserted = try connection.execute("""
            INSERT INTO pgherald.webhook_delivery
                   (endpoint, event_id, body, created_at, attempts, leased_by, next_attempt_at, last_attempt_at)
            SELECT $1, u.id, u.body, now() - make_interval(secs => u.age), u.attempts,
                   $5, now() + make_interval(secs => $6::float8), CASE WHEN u.attempts > 0 THEN now() END
              FROM unnest($2::bigint[], $3::text[], $4::float8[], $7::int[]) u(id, body, age, attempts)
            ON CONFLICT (endpoint, event_id) DO NOTHING
            RETURNING event_id::text, seq
            """, parameters: [
                endpoint.name, array(deliveries.map(\.eventID)), array(deliveries.map { String(decoding: $0.body, as: UTF8.self) }),
                array(deliveries.map { String($0.age / .seconds(1)) }), daemon, String(endpoint.lease / .seconds(1)),
                array(deliveries.map { String($0.attempts) }),
            ])
        var seqs: [String: Int64] = [:]
        for row in inserted.namedRows {
            seqs[try row.value("event_id")] = try row.value("seq")
        }
        return completions.compactMap { completion in
            guard let seq = seqs[completion.delivery.eventID] else { return nil }
            var completion = completion
            completion.delivery.source = .queued(seq: seq)
            return completion
        }
    }

    /// Writes back outcomes of leased rows.
    private static func writeBack(_ completions: [CompletedDelivery], daemon: String, on connection: LibpqConnection) throws(LibpqError) {
        var done: [String] = []
        var retries: (seqs: [String], delays: [String], statuses: [String?], errors: [String?]) = ([], [], [], [])
        var dead: (seqs: [String], statuses: [String?], excerpts: [String?], errors: [String]) = ([], [], [], [])
        for completion in completions {
            guard case .queued(let number) = completion.delivery.source else { continue }
            let seq = String(number)
            switch completion.decision {
            case .done:
                done.append(seq)
            case .retry(let after):
                retries.seqs.append(seq)
                retries.delays.append(String(after / .seconds(1)))
                retries.statuses.append(completion.status.map(String.init))
                retries.errors.append(completion.error)
            case .deadLetter(let reason):
                dead.seqs.append(seq)
                dead.statuses.append(completion.status.map(String.init))
                dead.excerpts.append(completion.responseExcerpt)
                dead.errors.append(reason)
            }
        }
        if !done.isEmpty {
            try connection.execute(
                "DELETE FROM pgherald.webhook_delivery WHERE seq = ANY($1::bigint[]) AND leased_by = $2",
                parameters: [array(done), daemon]
            )
        }
        if !retries.seqs.isEmpty {
            try connection.execute("""
                UPDATE pgherald.webhook_delivery d
                   SET leased_by = NULL, next_attempt_at = now() + make_interval(secs => u.delay),
                       last_status = u.status, last_error = u.error
                  FROM unnest($1::bigint[], $2::float8[], $3::int[], $4::text[]) u(seq, delay, status, error)
                 WHERE d.seq = u.seq AND d.leased_by = $5
                """, parameters: [array(retries.seqs), array(retries.delays), array(retries.statuses), array(retries.errors), daemon])
        }
        if !dead.seqs.isEmpty {
            try connection.execute("""
                WITH failed AS (
                    DELETE FROM pgherald.webhook_delivery d
                     USING unnest($1::bigint[], $2::int[], $3::text[], $4::text[]) u(seq, status, excerpt, error)
                     WHERE d.seq = u.seq AND d.leased_by = $5
                    RETURNING d.endpoint, d.event_id, d.body, d.created_at, d.attempts, u.status, u.excerpt, u.error
                )
                INSERT INTO pgherald.webhook_dead_letter
                       (endpoint, event_id, body, created_at, attempts, last_status, response_excerpt, error)
                SELECT * FROM failed
                """, parameters: [array(dead.seqs), array(dead.statuses), array(dead.excerpts), array(dead.errors), daemon])
        }
    }

    /// Queues, as rows due now, the handed-over events of daemons that died
    /// with them in flight: this daemon's own from before it started
    /// (`own: true`), or other daemons' whose lease has run out.
    /// - Returns: the endpoints that got rows, and how many.
    @discardableResult
    public func requeueInFlight(own: Bool, endpoints: [String]) async throws(LibpqError) -> [String: Int] {
        guard !endpoints.isEmpty else { return [:] }
        return try await connection.run { [daemon] connection throws(LibpqError) in
            try connection.inTransaction { () throws(LibpqError) -> [String: Int] in
                let abandoned = try connection.execute("""
                    SELECT endpoint, daemon, event_ids::text FROM pgherald.webhook_in_flight
                     WHERE endpoint = ANY($2::text[]) AND cardinality(event_ids) > 0
                       AND \(own ? "daemon = $1" : "daemon <> $1 AND lease_until < now()")
                     FOR UPDATE SKIP LOCKED
                    """, parameters: [daemon, Self.array(endpoints)])
                var requeued: [String: Int] = [:]
                for row in abandoned.namedRows {
                    let endpoint: String = try row.value("endpoint")
                    let owner: String = try row.value("daemon")
                    let ids: String = try row.value("event_ids")
                    let wanted = ids.dropFirst().dropLast().split(separator: ",").compactMap { UInt64($0) }
                    // As old as its write, like every handed-over event.
                    let wallClock = Int64(Date().timeIntervalSince1970 * 1e9)
                    var queued: (ids: [String], bodies: [String], ages: [String]) = ([], [], [])
                    for event in try Journal.events(ids: wanted, on: connection) {
                        guard let decoded = try? Event(payload: event.event) else { continue }
                        queued.ids.append(String(event.id))
                        queued.bodies.append(decoded.jsonText)
                        queued.ages.append(String((decoded.age(now: wallClock) ?? .zero) / .seconds(1)))
                    }
                    // The attempt in flight counts: the receiver may have had it.
                    try connection.execute("""
                        INSERT INTO pgherald.webhook_delivery (endpoint, event_id, body, created_at, attempts)
                        SELECT $1, u.id, u.body, now() - make_interval(secs => u.age), 1
                          FROM unnest($2::bigint[], $3::text[], $4::float8[]) u(id, body, age)
                        ON CONFLICT (endpoint, event_id) DO NOTHING
                        """, parameters: [endpoint, Self.array(queued.ids), Self.array(queued.bodies), Self.array(queued.ages)])
                    try connection.execute(
                        "UPDATE pgherald.webhook_in_flight SET event_ids = '{}' WHERE endpoint = $1 AND daemon = $2",
                        parameters: [endpoint, owner]
                    )
                    requeued[endpoint, default: 0] += queued.ids.count
                }
                return requeued
            }
        }
    }

    /// A PostgreSQL array literal; NULL elements for nil.
    static func array(_ values: [String?]) -> String {
        "{" + values.map { value in
            guard let value else { return "NULL" }
            var quoted = "\""
            for character in value.unicodeScalars {
                if character == "\"" || character == "\\" { quoted.unicodeScalars.append("\\") }
                quoted.unicodeScalars.append(character)
            }
            return quoted + "\""
        }.joined(separator: ",") + "}"
    }

    static func array(_ values: [String]) -> String {
        array(values.map(Optional.some))
    }
}

/// A row `lease` took: its feeding order, and the delivery it holds.
private struct LeasedDelivery: RowDecodable {
    var seq: Int64
    var delivery: PendingDelivery

    init(row: ResultRow) throws(LibpqError) {
        seq = try row.value("seq")
        delivery = PendingDelivery(
            source: .queued(seq: seq), eventID: try row.value("event_id"), body: Array(try row.value("body", as: String.self).utf8),
            attempts: try row.value("attempts"), age: .seconds(try row.value("age_seconds", as: Double.self))
        )
    }
}
