/// What `GET /stats` reports, shared by the daemon and its clients.
public struct DaemonStatistics: Codable, Sendable, Hashable {
    /// The listener's connection state.
    public struct Listener: Codable, Sendable, Hashable {
        /// `connecting`, `catching_up`, `listening`, `reconnecting` or `stopped`: the same spelling as logs and metrics.
        public var state: String
        /// Why the listener is not listening, when it is not; while it listens,
        /// which outputs are still starting (`outputs starting: webhooks`), for
        /// which `/healthz` answers 503.
        public var reason: String?
        /// An edge's source (`nats stream NAME`), with the last stream sequence
        /// it read and how many the stream holds past it: its freshness.
        public var source: String?
        public var streamSequence: UInt64?
        public var streamLag: UInt64?
        /// In `/healthz`: the outputs that are degraded, by name, with why (a cluster member whose
        /// id another daemon has, a NATS server that does not answer). The daemon still serves, so
        /// `/healthz` answers 200 for them; nil while none is.
        public var degraded: [String: String]?

        public init(state: String, reason: String? = nil, source: String? = nil, streamSequence: UInt64? = nil, streamLag: UInt64? = nil) {
            self.state = state
            self.reason = reason
            self.source = source
            self.streamSequence = streamSequence
            self.streamLag = streamLag
        }
    }

    /// The durable journal, as last measured (every maintenance run).
    public struct Journal: Codable, Sendable, Hashable {
        /// Events, counted exactly in up to 100,000 journal rows (a statement's
        /// events share rows of up to 100); beyond, PostgreSQL's estimate of rows.
        public var rows: Int64
        /// Table, index and TOAST size on disk.
        public var bytes: Int64
        /// When the oldest row was written (ISO 8601, UTC); `nil` when empty.
        public var oldestAt: String?
        public var oldestEventID: String?
        /// Events pruned by retention since start.
        public var pruned: Int64
        public var retentionSeconds: Double

        public init(rows: Int64, bytes: Int64, oldestAt: String?, oldestEventID: String?, pruned: Int64, retentionSeconds: Double) {
            self.rows = rows
            self.bytes = bytes
            self.oldestAt = oldestAt
            self.oldestEventID = oldestEventID
            self.pruned = pruned
            self.retentionSeconds = retentionSeconds
        }
    }

    /// Resumes from the journal (`Last-Event-ID` or `since=` older than the daemon's memory), since start.
    public struct Replays: Codable, Sendable, Hashable {
        /// Resumes whose event was looked up.
        public var resumes: UInt64 = 0
        /// Lookups run: resumes that arrive together share one.
        public var lookups: UInt64 = 0
        /// Pages read from the journal.
        public var pagesRead: UInt64 = 0
        /// Pages that a resume took from another's read of the same range.
        public var pagesShared: UInt64 = 0
        /// Times a replay waited for room in its holder's page budget: its
        /// holder's other replays held their share and had not sent it yet.
        public var waitsForRoom: UInt64 = 0

        public init() {}

        // Figures recorded before `waitsForRoom` was counted (the benchmark's results files) have none.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            resumes = try container.decode(UInt64.self, forKey: .resumes)
            lookups = try container.decode(UInt64.self, forKey: .lookups)
            pagesRead = try container.decode(UInt64.self, forKey: .pagesRead)
            pagesShared = try container.decode(UInt64.self, forKey: .pagesShared)
            waitsForRoom = try container.decodeIfPresent(UInt64.self, forKey: .waitsForRoom) ?? 0
        }
    }

    /// One webhook endpoint: this daemon's attempts, and the shared backlog in the database.
    public struct Webhook: Codable, Sendable, Hashable {
        public var attempts: UInt64 = 0
        public var successes: UInt64 = 0
        /// Attempts that did not deliver (retried or given up).
        public var failures: UInt64 = 0
        /// Failures that will be tried again.
        public var retries: UInt64 = 0
        /// Deliveries moved to the dead letters.
        public var deadLettered: UInt64 = 0
        public var inFlight: Int = 0
        /// True while the receiver fails and only probes are sent.
        public var failing = false
        public var lastStatus: Int?
        public var lastError: String?
        /// Deliveries waiting in the database (for every daemon), as last measured.
        public var backlog: Int?
        public var oldestPendingSeconds: Double?
        /// When the earliest retry of a failed delivery is due (ISO 8601, UTC), as last measured.
        public var nextRetryAt: String?
        public var dead: Int?

        public init() {}
    }

    public var version: String
    /// Events since the daemon started.
    public var changeCount: UInt64
    /// Events per table, keyed `schema.table`.
    public var tables: [String: UInt64]
    /// Subscribers now, by kind (`sse`, `ndjson`, `stdout`, ...).
    public var subscribers: [String: Int]
    /// Subscribers whose mailbox overflowed, since start: dropped, or a socket
    /// stream that read on from the history (see ``Broker/Statistics/overflowCount``).
    public var overflows: UInt64
    public var uptimeSeconds: Double
    public var listener: Listener
    /// `durable` or `notify-only`; `nil` until the first connection.
    public var durability: String?
    /// `nil` in notify-only mode, or before the first measurement.
    public var journal: Journal?
    /// What clients resuming from the journal cost it; `nil` until one has.
    public var replays: Replays?
    /// By endpoint name; `nil` without webhooks.
    public var webhooks: [String: Webhook]?
    /// Every output that is on, by its configuration section (`stdout`, `event_log`, …).
    public var outputs: [String: OutputStatistics]?
    /// By live query name; `nil` without a `queries` section.
    public var queries: [String: LiveQueryStatistics]?
    /// `nil` until a subscriber under `rls: true` has come.
    public var rowSecurity: RowSecurityStatistics?
    /// `nil` without a `cluster` section.
    public var cluster: ClusterStatistics?
    /// The realtime keys and users holding the most connections and channels, most first, named
    /// as `key NAME`, `role ROLE` or `role ROLE, sub SUB` (never a key or token); `nil` while none holds any.
    public var consumers: [ConsumerStatistics]?
    /// The keys, users and addresses holding the most `/events` and `/queries` streams over the
    /// network, most first, named as ``consumers`` are or as `address IP`; `nil` while none holds any.
    public var streamConsumers: [StreamConsumerStatistics]?

    /// What one realtime consumer holds, against its limits.
    public struct ConsumerStatistics: Codable, Sendable, Hashable {
        public var consumer: String
        public var connections: Int
        public var channels: Int
        /// What its channels' filter conditions cost together (``ColumnPredicate/cost``).
        public var conditions: Int

        public init(consumer: String, connections: Int, channels: Int, conditions: Int = 0) {
            self.consumer = consumer
            self.connections = connections
            self.channels = channels
            self.conditions = conditions
        }
    }

    /// What one key, user or address holds of the socket API's streams.
    public struct StreamConsumerStatistics: Codable, Sendable, Hashable {
        public var consumer: String
        public var streams: Int
        /// What its streams' `where=` conditions cost together (``ColumnPredicate/cost``).
        public var conditions: Int

        public init(consumer: String, streams: Int, conditions: Int = 0) {
            self.consumer = consumer
            self.streams = streams
            self.conditions = conditions
        }
    }

    public init(
        version: String,
        changeCount: UInt64,
        tables: [String: UInt64],
        subscribers: [String: Int],
        overflows: UInt64,
        uptimeSeconds: Double,
        listener: Listener,
        durability: String? = nil,
        journal: Journal? = nil,
        webhooks: [String: Webhook]? = nil,
        outputs: [String: OutputStatistics]? = nil
    ) {
        self.outputs = outputs
        self.webhooks = webhooks
        self.durability = durability
        self.journal = journal
        self.version = version
        self.changeCount = changeCount
        self.tables = tables
        self.subscribers = subscribers
        self.overflows = overflows
        self.uptimeSeconds = uptimeSeconds
        self.listener = listener
    }
}
