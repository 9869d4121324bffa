public import Herald
public import HeraldOutput
public import HeraldPostgres
public import HeraldService
public import HeraldSettings

/// Everything `pgherald serve` runs with, from the file, the environment and
/// flags (see ``ConfigurationSources``). Each default is the one documented
/// in `systemd/pgherald.yaml` and `serve --help`.
public struct DaemonConfiguration: Sendable {
    /// Key `database`: libpq conninfo or URI; empty (the default) uses libpq's
    /// defaults (`PG*` variables, `.pgpass`). With `password_file`, the password comes from that file.
    public var database: ConnectionString
    /// Whether anything names the database: the key in the file, an
    /// environment variable or a flag (`database: ""` chooses libpq's defaults
    /// on purpose), or a libpq variable such as `PGHOST`. A configuration file
    /// that names none has not been set up yet, as the packaged one is when
    /// installed, and `serve` refuses to start with it (exit 78).
    public var databaseIsNamed: Bool
    /// Key `listen_database`: the listener's own conninfo (LISTEN, catch-up,
    /// checkpoints), for a `database` that goes through a transaction pooler.
    /// Default: none, the listener uses `database`.
    public var listenDatabase: ConnectionString?
    /// Key `name`. Default `default`.
    public var name: String
    /// Key `source`: where events come from. Default `database`.
    public var source: Source = .database
    /// Key `durability`. Default: as installed.
    public var durability: Durability?
    /// Key `retention`: how long delivered events stay in the journal at least, at most twice as long. Default 24h.
    public var retention: Duration
    /// Key `prune_interval`: time between runs that empty and turn the journal's parts. Default 60s.
    public var pruneInterval: Duration
    /// Key `history`. Default 100,000 events.
    public var history: Int
    /// Key `mailbox_capacity`. Default 4096.
    public var mailboxCapacity: Int
    /// Key `connect_timeout`. Default 10s.
    public var connectTimeout: Duration
    /// Key `probe_interval`: how often the listener proves that notifications
    /// still reach it. Default 30s.
    public var probeInterval: Duration
    /// Key `backstop_interval`: how often a parked durable listener sweeps the
    /// journal for events whose notification never came. Default 10s.
    public var backstopInterval: Duration
    /// Key `stop_grace`: the longest a stop on SIGTERM takes, whatever peers do.
    /// The listener records its final checkpoint first; a second before the end,
    /// what is still stopping is cancelled; at the end the daemon exits. Default 5s.
    public var stopGrace: Duration
    /// Section `log`.
    public var logLevels: LogLevels
    /// Key `log.format`. Default: pretty on a terminal, logfmt otherwise.
    public var logFormat: LogFormat?
    /// Key `metrics.listen`: `HOST:PORT` for `/metrics` over TCP. Default: off.
    public var metricsListen: String?
    /// Section `access`: who may see what on the socket. Default: none, so
    /// whoever the socket's mode and group let in sees every table.
    public var access: AccessPolicy?
    /// The settings of every output that is on, by section, as the
    /// registry's kinds read them; ``subscript(_:)`` gives one as its own type.
    public var outputs: [String: OutputKind.Settings]
    /// Things worth saying that do not stop the daemon.
    public var warnings: [String]
    /// Every setting as it is in force, with its source, for `check-config`.
    public var effective: [EffectiveSetting]

    /// Where a daemon takes its events from.
    public enum Source: String, Sendable, CaseIterable {
        /// This database's journal (or notifications, notify-only): a database daemon.
        case database
        /// The JetStream stream `cluster.stream` that database daemons fill:
        /// an edge daemon, which adds no reader of the journal. Its `database`
        /// serves only the catalog, row security and live queries, and a
        /// resume older than its history.
        case nats
    }

    /// The settings of the output `kind`; nil when it is off.
    public subscript<Kind: Output>(_ kind: Kind.Type) -> Kind.Configuration? {
        outputs[Kind.section]?.as(Kind.Configuration.self)
    }
}
