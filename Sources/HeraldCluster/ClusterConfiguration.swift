public import HeraldNATS
public import HeraldNATSOutput

/// The `cluster:` section: daemons with the same `cluster.name` and NATS
/// servers share client broadcasts and presence.
public struct ClusterConfiguration: Sendable, Equatable {
    /// Key `cluster.name`: the cluster's name, in its NATS subjects
    /// (`pgherald-cluster.NAME.>`). Required: no cluster without it.
    public var name: String
    /// Key `cluster.nats`: `nats://host:port` URLs, tried in turn. Default `nats://127.0.0.1:4222`.
    public var servers: [NATSOutputConfiguration.Server]
    /// Key `cluster.member`: this daemon's name among the members, its own. Default `HOSTNAME/NAME/PID`, NAME being the daemon's `--name`.
    public var member: String?
    /// Key `cluster.heartbeat`: how often a member says it is alive. Default 1s.
    public var heartbeat: Duration
    /// Key `cluster.member_timeout`: a member not heard from for this long
    /// has left, and its clients' presence with it, on every other member.
    /// Default 5s; at least three heartbeats. Presence of a daemon that dies
    /// or loses NATS leaves everyone within this plus one heartbeat.
    public var memberTimeout: Duration
    /// Keys `cluster.user` with `cluster.password_file`, `cluster.token_file`,
    /// `cluster.nkey_seed_file` or `cluster.credentials_file`, as under `nats`. Default: none.
    public var authentication: NATSAuthentication
    /// Keys `cluster.tls` and `cluster.ca_file`, as under `nats`. Default: off.
    public var tls: NATSTLS?
    /// Key `cluster.stream`: the JetStream stream an edge daemon (`source: nats`)
    /// takes its events from, the one the database daemons' `nats` output
    /// fills with every event (`nats.stream`, no filter). Default: none;
    /// required by `source: nats`.
    public var stream: String?

    public init(
        name: String, servers: [NATSOutputConfiguration.Server] = [.init(host: "127.0.0.1")], member: String? = nil,
        heartbeat: Duration = .seconds(1), memberTimeout: Duration = .seconds(5), authentication: NATSAuthentication = .none, tls: NATSTLS? = nil,
        stream: String? = nil
    ) {
        self.stream = stream
        self.name = name
        self.servers = servers
        self.member = member
        self.heartbeat = heartbeat
        self.memberTimeout = memberTimeout
        self.authentication = authentication
        self.tls = tls
    }

    /// Every subject the cluster uses is under this; apart from the events'
    /// `pgherald.…` so that the stream of events never takes cluster traffic.
    public var subjectPrefix: String { "pgherald-cluster.\(name)" }

    /// The subjects the cluster publishes on, for checking that no stream takes them.
    public var subjects: [String] { ["heartbeat", "presence", "broadcast", "resume"].map { "\(subjectPrefix).\($0)" } }
}
