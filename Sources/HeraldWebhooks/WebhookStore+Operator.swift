public import HeraldPostgres

extension WebhookStore {
    /// One endpoint's state in the database, for `webhooks list`, `/stats` and `/metrics`.
    public struct Backlog: Sendable, Hashable, Codable {
        /// Every event not yet delivered: rows, ids in flight, and what waits in the journal.
        public var pending: Int
        /// Of `pending`, the journal's events the feed has not reached yet. It
        /// counts every table, so for an endpoint with a filter it is an upper bound.
        public var inJournal = 0
        /// Leased by a daemon and not yet answered.
        public var inFlight: Int
        /// Pending after at least one failed attempt.
        public var failing: Int
        public var dead: Int
        public var oldestPendingSeconds: Double?
        /// When the earliest retry of a failed delivery is due (ISO 8601, UTC); nil when none waits for one.
        public var nextRetryAt: String?
        public var lastStatus: Int?
        public var lastError: String?
        /// For ordered endpoints: the event that holds the others back, if it is being retried.
        public var heldBy: String?

        public init(pending: Int = 0, inFlight: Int = 0, failing: Int = 0, dead: Int = 0) {
            self.pending = pending
            self.inFlight = inFlight
            self.failing = failing
            self.dead = dead
        }
    }

    /// A delivery given up on.
    public struct DeadLetter: Sendable, Hashable, Codable {
        public var id: Int64
        public var endpoint: String
        public var eventID: String
        public var attempts: Int
        public var lastStatus: Int?
        public var error: String
        public var responseExcerpt: String?
        public var failedAt: String
        public var body: String
    }

    /// Every endpoint with rows in the tables.
    public func backlogs() async throws(LibpqError) -> [String: Backlog] {
        try await connection.run { connection throws(LibpqError) in
            var backlogs: [String: Backlog] = [:]
            let pending = try connection.execute("""
                SELECT endpoint, count(*) AS pending,
                       count(*) FILTER (WHERE leased_by IS NOT NULL AND next_attempt_at > now()) AS in_flight,
                       count(*) FILTER (WHERE attempts > 0 AND leased_by IS NULL) AS failing,
                       extract(epoch FROM now() - min(created_at))::float8 AS oldest_seconds,
                       to_char(min(next_attempt_at) FILTER (WHERE attempts > 0 AND leased_by IS NULL) AT TIME ZONE 'UTC',
                               'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS next_retry_at,
                       (array_agg(last_status ORDER BY last_attempt_at DESC NULLS LAST))[1] AS last_status,
                       (array_agg(last_error ORDER BY last_attempt_at DESC NULLS LAST))[1] AS last_error,
                       (array_agg(event_id::text || CASE WHEN attempts > 0 AND leased_by IS NULL
                                   THEN ' (attempt ' || attempts || ' failed: ' || coalesce(last_error, '?') || ')' ELSE '' END
                                  ORDER BY seq))[1] AS held_by
                  FROM pgherald.webhook_delivery GROUP BY endpoint
                """)
            for row in pending.namedRows {
                var backlog = Backlog(pending: try row.value("pending"), inFlight: try row.value("in_flight"), failing: try row.value("failing"))
                backlog.oldestPendingSeconds = try row.optional("oldest_seconds")
                backlog.nextRetryAt = try row.text("next_retry_at")
                backlog.lastStatus = try row.optional("last_status")
                backlog.lastError = try row.text("last_error")
                backlog.heldBy = try row.text("held_by")
                backlogs[try row.value("endpoint")] = backlog
            }
            // Handed-over events are pending and in flight, without rows of their own.
            let handedOver = try connection.execute("""
                SELECT endpoint, sum(cardinality(event_ids)) AS events FROM pgherald.webhook_in_flight
                 WHERE cardinality(event_ids) > 0 GROUP BY endpoint
                """)
            for row in handedOver.namedRows {
                let name: String = try row.value("endpoint")
                let count: Int = try row.value("events")
                backlogs[name, default: Backlog()].pending += count
                backlogs[name, default: Backlog()].inFlight += count
            }
            // The backlog a busy endpoint leaves in the journal, past its feed's position. A batch
            // the feed stopped inside counts whole (it holds at most 100 events).
            let waiting = try connection.execute("""
                SELECT f.endpoint,
                       sum(coalesce(j.event_count, 1)) AS events,
                       extract(epoch FROM now() - min(j.created_at))::float8 AS oldest_seconds
                  FROM pgherald.webhook_feed f
                  JOIN pgherald.journal j
                    ON j.txid >= pg_snapshot_xmin(f.snapshot) AND NOT pg_visible_in_snapshot(j.txid, f.snapshot)
                   AND NOT coalesce(pg_visible_in_snapshot(j.txid, f.target)
                                    AND (j.txid, coalesce(j.last_id, j.id)) <= (f.after_txid, f.after_id), false)
                 GROUP BY f.endpoint
                """)
            for row in waiting.namedRows {
                let name: String = try row.value("endpoint")
                let count: Int = try row.value("events")
                guard count > 0 else { continue }
                backlogs[name, default: Backlog()].pending += count
                backlogs[name, default: Backlog()].inJournal = count
                if let age = try row.optional("oldest_seconds", as: Double.self) {
                    backlogs[name, default: Backlog()].oldestPendingSeconds = max(backlogs[name]?.oldestPendingSeconds ?? 0, age)
                }
            }
            let dead = try connection.execute("SELECT endpoint, count(*) AS dead FROM pgherald.webhook_dead_letter GROUP BY endpoint")
            for row in dead.namedRows {
                backlogs[try row.value("endpoint"), default: Backlog()].dead = try row.value("dead")
            }
            return backlogs
        }
    }

    /// Dead letters, oldest first, optionally of one endpoint.
    public func deadLetters(endpoint: String? = nil, limit: Int = 1000) async throws(LibpqError) -> [DeadLetter] {
        try await connection.run { connection throws(LibpqError) in
            let result = try connection.execute("""
                SELECT id, endpoint, event_id, attempts, last_status, error, response_excerpt,
                       to_char(failed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS failed_at, body
                  FROM pgherald.webhook_dead_letter
                 WHERE $1::text IS NULL OR endpoint = $1
                 ORDER BY id LIMIT \(limit)
                """, parameters: [endpoint])
            return try result.decode(DeadLetter.self)
        }
    }

    /// What ``replay(ids:endpoint:)`` did.
    public struct Replayed: Sendable {
        /// The dead letters taken out of the dead letters.
        public var revived: Set<Int64>
        /// How many of them were queued again (one whose event is already pending again is dropped).
        public var queued: Int
    }

    /// Moves dead letters back to pending with fresh attempts, to be sent at
    /// once. Either `ids`, or every dead letter of `endpoint`.
    public func replay(ids: [Int64], endpoint: String?) async throws(LibpqError) -> Replayed {
        try await connection.run { connection throws(LibpqError) in
            try connection.inTransaction { () throws(LibpqError) -> Replayed in
                let result = try connection.execute("""
                    WITH revived AS (
                        DELETE FROM pgherald.webhook_dead_letter
                         WHERE ($1::text IS NOT NULL AND endpoint = $1) OR id = ANY($2::bigint[])
                        RETURNING id, endpoint, event_id, body
                    ), queued AS (
                        INSERT INTO pgherald.webhook_delivery (endpoint, event_id, body)
                        SELECT endpoint, event_id, body FROM revived
                        ON CONFLICT (endpoint, event_id) DO NOTHING
                        RETURNING 1
                    )
                    SELECT coalesce((SELECT string_agg(id::text, ',') FROM revived), '') AS revived,
                           (SELECT count(*) FROM queued) AS queued
                    """, parameters: [endpoint, Self.array(ids.map(String.init))])
                guard let row = result.namedRows.first else { throw LibpqError(.queryFailed, "replaying dead letters returned no row") }
                let revived: String = try row.value("revived")
                return Replayed(revived: Set(revived.split(separator: ",").compactMap { Int64($0) }), queued: try row.value("queued"))
            }
        }
    }
}

extension WebhookStore.DeadLetter: RowDecodable {
    /// From a row of `pgherald.webhook_dead_letter`, with `failed_at` as ISO 8601 text.
    public init(row: ResultRow) throws(LibpqError) {
        self.init(
            id: try row.value("id"), endpoint: try row.value("endpoint"), eventID: try row.value("event_id"),
            attempts: try row.value("attempts"), lastStatus: try row.optional("last_status"), error: try row.text("error") ?? "",
            responseExcerpt: try row.text("response_excerpt"), failedAt: try row.value("failed_at"), body: try row.value("body")
        )
    }
}
