public import Herald
public import HeraldNATS

/// The `nats:` section: publish every matching event to a JetStream stream.
public struct NATSOutputConfiguration: Sendable, Equatable {
    /// A server to connect to, from a `nats://host:port` URL.
    public struct Server: Sendable, Equatable, CustomStringConvertible {
        public var host: String
        public var port: Int

        public init(host: String, port: Int = 4222) {
            self.host = host
            self.port = port
        }

        public var description: String { "nats://\(host):\(port)" }
    }

    /// Key `nats.servers`: tried in turn. Default `nats://127.0.0.1:4222`.
    public var servers: [Server]
    /// Key `nats.subject`. Default `pgherald.{schema}.{table}.{op}`.
    public var subject: NATSSubjectTemplate
    /// Key `nats.stream`: the JetStream stream that takes the subjects. Required: the output is off without it.
    public var stream: String
    /// Key `nats.create_stream`: create the stream, or update its subjects
    /// and duplicate window, at every connection. Default false: the stream
    /// must exist, and its absence is reported.
    public var createStream: Bool
    /// Key `nats.duplicate_window`: the stream's de-duplication window when
    /// pgherald creates it. A publish repeated after an outage longer than
    /// this would be stored twice. Default 2m, JetStream's own.
    public var duplicateWindow: Duration
    /// Key `nats.replicas`: copies of the stream when pgherald creates it, on
    /// as many servers of a JetStream cluster (3 survives the loss of one). Default 1.
    public var replicas: Int
    /// Keys `nats.table`, `nats.op`, `nats.where`: the socket's filter language. Default: every event.
    public var filter: EventFilter
    /// Key `nats.broadcasts`: also publish what `pgherald.send` broadcasts
    /// (op `BROADCAST`, schema `realtime`, the topic as table), whatever the
    /// filter, so that edges deliver them as a database daemon does. Default true.
    public var broadcasts: Bool
    /// At most one of: key `nats.user` with `nats.password_file`, `nats.token_file`,
    /// `nats.nkey_seed_file` (a user's NKey seed), or `nats.credentials_file`
    /// (a user's JWT and seed, as `nsc` writes them). Default: no authentication.
    public var authentication: NATSAuthentication
    /// Key `nats.tls`, with `nats.ca_file` for a private CA: TLS after the
    /// server's `INFO`. Default: off, and a server that requires TLS is refused with the reason.
    public var tls: NATSTLS?
    /// Key `nats.max_in_flight`: publishes awaiting their acknowledgement at once. Default 256.
    public var maximumInFlight: Int
    /// Key `nats.ack_timeout`: how long an acknowledgement may take before the connection is given up. Default 5s.
    public var acknowledgementTimeout: Duration

    public init(
        servers: [Server] = [Server(host: "127.0.0.1")], subject: NATSSubjectTemplate, stream: String, createStream: Bool = false,
        duplicateWindow: Duration = .seconds(120), replicas: Int = 1, filter: EventFilter = .all, broadcasts: Bool = true, authentication: NATSAuthentication = .none, tls: NATSTLS? = nil, maximumInFlight: Int = 256, acknowledgementTimeout: Duration = .seconds(5)
    ) {
        self.tls = tls
        self.servers = servers
        self.subject = subject
        self.stream = stream
        self.createStream = createStream
        self.duplicateWindow = duplicateWindow
        self.replicas = replicas
        self.filter = filter
        self.broadcasts = broadcasts
        self.authentication = authentication
        self.maximumInFlight = maximumInFlight
        self.acknowledgementTimeout = acknowledgementTimeout
    }
}

extension NATSOutputConfiguration {
    /// Whether `event` goes to the stream.
    func publishes(_ event: Event) -> Bool {
        event.operation == .broadcast ? broadcasts : filter.matches(event)
    }
}
