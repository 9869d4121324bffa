public import Herald

/// One receiver of events, from the `webhooks:` list of the configuration file.
public struct WebhookEndpoint: Sendable, Hashable {
    /// How long and how often a delivery is tried.
    public struct Limits: Sendable, Hashable {
        /// Key `timeout`: the whole request, connect to last byte. Default 10 s.
        public var timeout: Duration
        /// Key `max_attempts`. Default 12.
        public var maximumAttempts: Int
        /// Key `max_age`: an event not delivered this long after it was queued is given up. Default 24 h.
        public var maximumAge: Duration

        public init(timeout: Duration = .seconds(10), maximumAttempts: Int = 12, maximumAge: Duration = .seconds(24 * 3600)) {
            self.timeout = timeout
            self.maximumAttempts = maximumAttempts
            self.maximumAge = maximumAge
        }
    }

    /// Key `name`: unique and stable, since pending work in the database is kept under it.
    public var name: String
    /// Key `url`: http or https.
    public var url: String
    /// Keys `table`, `op` and `where`, in the socket's filter language. Default: every event.
    public var filter: EventFilter
    /// Keys `secret`, `secrets` or `secret_file`: the newest first; each signs every request.
    public var secrets: [WebhookSecret]
    public var limits: Limits
    /// Key `concurrency`: requests in flight at once. Default 16.
    public var concurrency: Int
    /// Key `ordered`: one request at a time, in event order; a failing event holds those behind it. Default false.
    public var ordered: Bool
    /// Key `headers`: extra request headers, such as an authorization the receiver wants.
    public var headers: [String: String]

    public init(
        name: String,
        url: String,
        filter: EventFilter = .all,
        secrets: [WebhookSecret],
        limits: Limits = .init(),
        concurrency: Int = 16,
        ordered: Bool = false,
        headers: [String: String] = [:]
    ) {
        self.name = name
        self.url = url
        self.filter = filter
        self.secrets = secrets
        self.limits = limits
        self.concurrency = concurrency
        self.ordered = ordered
        self.headers = headers
    }

    /// Requests in flight at once, as the dispatcher applies it.
    public var effectiveConcurrency: Int { ordered ? 1 : max(1, concurrency) }

    /// How long another daemon waits before taking over a delivery this one
    /// leased: the request's timeout and a margin for writing its outcome.
    public var lease: Duration { limits.timeout + .seconds(5) }
}
