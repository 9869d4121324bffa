import Foundation
public import Herald
public import HeraldPostgres

/// Webhook state in the `pgherald` schema: feeding, leasing, completing and
/// the dead letters. Every method is one statement or one transaction, so a
/// daemon killed at any point leaves the tables consistent.
public final class WebhookStore: Sendable {
    let connection: SerialConnection
    /// Leases are taken under this name (the daemon's `--name`).
    public let daemon: String

    public init(connection: ConnectionString, daemon: String, applicationName: String = "pgherald-webhooks") {
        self.connection = SerialConnection(connection, applicationName: applicationName)
        self.daemon = daemon
    }

    /// Fails with a message that says what to run when the database has no webhook tables.
    public func checkInstalled() async throws(PostgresError) {
        let installed = try await connection.run { connection throws(PostgresError) in
            try connection.execute("SELECT to_regclass('pgherald.webhook_delivery') IS NOT NULL").rows.first?[0] == "t"
        }
        guard installed else {
            throw PostgresError(.queryFailed, "the database has no webhook tables (pgherald.webhook_delivery); run `pgherald install` to upgrade the publisher to version 3")
        }
    }

    /// Starts feeding each endpoint that has no feed yet from now on; events
    /// committed before its first start are not sent to it.
    public func startFeeds(_ endpoints: [String]) async throws(PostgresError) {
        try await connection.run { connection throws(PostgresError) in
            try connection.execute("""
                INSERT INTO pgherald.webhook_feed (endpoint, snapshot)
                SELECT name, pg_current_snapshot() FROM unnest($1::text[]) name
                ON CONFLICT (endpoint) DO NOTHING
                """, parameters: [Self.array(endpoints)])
        }
    }

    /// Deliveries this daemon name leased before it last stopped (it was killed
    /// mid-flight) become due now instead of when their lease runs out.
    @discardableResult
    public func releaseLeases() async throws(PostgresError) -> Int {
        try await connection.run { [daemon] connection throws(PostgresError) in
            try connection.execute("""
                UPDATE pgherald.webhook_delivery SET leased_by = NULL, next_attempt_at = now()
                 WHERE leased_by = $1 AND next_attempt_at > now()
                """, parameters: [daemon]).affectedRows ?? 0
        }
    }

    /// Queues the journal's events for each endpoint whose filter matches them,
    /// from where its feed stopped to now, and moves the feeds on: all in one
    /// transaction, so each event is queued once for each endpoint however
    /// many daemons feed. Endpoints another daemon is feeding right now are
    /// skipped; that daemon queues their events.
    /// - Returns: the endpoints that got new deliveries.
    public func feedFromJournal(_ endpoints: [WebhookEndpoint], pageSize: Int = 1000) async throws(PostgresError) -> Set<String> {
        guard !endpoints.isEmpty else { return [] }
        return try await connection.run { connection throws(PostgresError) in
            try connection.inTransaction { () throws(PostgresError) -> Set<String> in
                let locked = try connection.execute("""
                    SELECT endpoint, snapshot::text FROM pgherald.webhook_feed
                     WHERE endpoint = ANY($1::text[]) FOR UPDATE SKIP LOCKED
                    """, parameters: [Self.array(endpoints.map(\.name))])
                guard !locked.rows.isEmpty else { return [] }
                let now = try Journal.currentSnapshot(on: connection)
                let byName = Dictionary(endpoints.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
                // Endpoints fed to the same point read the journal once.
                var groups: [String: [WebhookEndpoint]] = [:]
                for row in locked.rows {
                    guard let name = row[0], let snapshot = row[1], let endpoint = byName[name] else { continue }
                    groups[snapshot, default: []].append(endpoint)
                }
                var fed: Set<String> = []
                for (snapshotText, group) in groups {
                    guard let since = TransactionSnapshot(snapshotText), since != now else { continue }
                    var after: (transactionID: UInt64, id: UInt64)?
                    while true {
                        let rows = try Journal.events(visibleIn: now, notVisibleIn: since, after: after, limit: pageSize, on: connection)
                        var names: [String] = [], ids: [String] = [], bodies: [String] = []
                        for row in rows {
                            guard let event = try? Event(payload: row.event) else { continue }
                            let matching = group.filter { $0.filter.matches(event) }
                            guard !matching.isEmpty else { continue }
                            // Encoded once, however many endpoints get it.
                            let body = event.jsonText
                            for endpoint in matching {
                                names.append(endpoint.name)
                                ids.append(String(row.id))
                                bodies.append(body)
                                fed.insert(endpoint.name)
                            }
                        }
                        if !names.isEmpty { try Self.insert(names: names, ids: ids, bodies: bodies, on: connection) }
                        guard rows.count == pageSize, let last = rows.last else { break }
                        after = (last.transactionID, last.id)
                    }
                }
                try connection.execute("""
                    UPDATE pgherald.webhook_feed SET snapshot = $2::pg_snapshot, fed_at = now()
                     WHERE endpoint = ANY($1::text[])
                    """, parameters: [Self.array(locked.rows.compactMap { $0[0] }), now.description])
                return fed
            }
        }
    }

    /// Queues live events (notify-only mode, where there is no journal to feed from).
    public func queue(_ deliveries: [(endpoint: String, event: Event)]) async throws(PostgresError) {
        guard !deliveries.isEmpty else { return }
        try await connection.run { connection throws(PostgresError) in
            try Self.insert(
                names: deliveries.map(\.endpoint), ids: deliveries.map(\.event.id), bodies: deliveries.map(\.event.jsonText),
                on: connection
            )
        }
    }

    private static func insert(names: [String], ids: [String], bodies: [String], on connection: PostgresConnection) throws(PostgresError) {
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
    public func lease(_ endpoint: WebhookEndpoint, limit: Int) async throws(PostgresError) -> [PendingDelivery] {
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
        let sql = """
            UPDATE pgherald.webhook_delivery d
               SET leased_by = $2, attempts = d.attempts + 1, last_attempt_at = now(),
                   next_attempt_at = now() + make_interval(secs => $3::float8)
              FROM (\(candidates)) c
             WHERE d.seq = c.seq
            RETURNING d.seq, d.event_id, d.attempts, extract(epoch FROM now() - d.created_at)::float8, d.body
            """
        var parameters: [String?] = [endpoint.name, daemon, String(endpoint.lease / .seconds(1))]
        if !endpoint.ordered { parameters.append(String(limit)) }
        let result = try await connection.run { [parameters] connection throws(PostgresError) in
            try connection.execute(sql, parameters: parameters)
        }
        return result.rows.compactMap { row -> PendingDelivery? in
            guard let seq = row[0].flatMap({ Int64($0) }), let id = row[1], let attempts = row[2].flatMap({ Int($0) }),
                  let age = row[3].flatMap({ Double($0) }), let body = row[4] else { return nil }
            return PendingDelivery(seq: seq, eventID: id, body: Array(body.utf8), attempts: attempts, age: .seconds(age))
        }.sorted { $0.seq < $1.seq }
    }

    /// Writes back outcomes: delivered rows go, retries wait, failures move to
    /// the dead letters. Rows whose lease this daemon lost (it ran out and
    /// another daemon took them) are left to that daemon.
    public func complete(_ completions: [CompletedDelivery]) async throws(PostgresError) {
        guard !completions.isEmpty else { return }
        var done: [String] = []
        var retries: (seqs: [String], delays: [String], statuses: [String?], errors: [String?]) = ([], [], [], [])
        var dead: (seqs: [String], statuses: [String?], excerpts: [String?], errors: [String]) = ([], [], [], [])
        for completion in completions {
            let seq = String(completion.seq)
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
        try await connection.run { [daemon, done, retries, dead] connection throws(PostgresError) in
            if !done.isEmpty {
                try connection.execute(
                    "DELETE FROM pgherald.webhook_delivery WHERE seq = ANY($1::bigint[]) AND leased_by = $2",
                    parameters: [Self.array(done), daemon]
                )
            }
            if !retries.seqs.isEmpty {
                try connection.execute("""
                    UPDATE pgherald.webhook_delivery d
                       SET leased_by = NULL, next_attempt_at = now() + make_interval(secs => u.delay),
                           last_status = u.status, last_error = u.error
                      FROM unnest($1::bigint[], $2::float8[], $3::int[], $4::text[]) u(seq, delay, status, error)
                     WHERE d.seq = u.seq AND d.leased_by = $5
                    """, parameters: [
                        Self.array(retries.seqs), Self.array(retries.delays), Self.array(retries.statuses),
                        Self.array(retries.errors), daemon,
                    ])
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
                    """, parameters: [
                        Self.array(dead.seqs), Self.array(dead.statuses), Self.array(dead.excerpts), Self.array(dead.errors), daemon,
                    ])
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
