public import Herald
public import HeraldPostgres
public import HeraldServer
public import HeraldWebhooks
import HeraldRealtime

/// Everything `pgherald serve` runs with, from the file, the environment and
/// flags (see ``ConfigurationSources``). Each default is the one documented
/// in `systemd/pgherald.yaml` and `serve --help`.
public struct DaemonConfiguration: Sendable {
    /// What `stdout` prints.
    public enum StdoutChoice: String, Sendable, CaseIterable {
        case none, json, pretty
    }

    /// Key `database`: libpq conninfo or URI; empty (the default) uses libpq's
    /// defaults (`PG*` variables, `.pgpass`). With `password_file`, the password comes from that file.
    public var database: ConnectionString
    /// Key `listen_database`: the listener's own conninfo (LISTEN, catch-up,
    /// checkpoints), for a `database` that goes through a transaction pooler.
    /// Default: none, the listener uses `database`.
    public var listenDatabase: ConnectionString?
    /// Key `name`. Default `default`.
    public var name: String
    /// Key `durability`. Default: as installed.
    public var durability: Durability?
    /// Key `retention`. Default 24h.
    public var retention: Duration
    /// Key `prune_interval`. Default 60s.
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
    /// Key `stdout`. Default none.
    public var stdout: StdoutFormat?
    /// Section `socket`; nil with `socket.enabled: false`.
    public var socket: SocketConfiguration?
    /// Section `log`.
    public var logLevels: LogLevels
    /// Key `log.format`. Default: pretty on a terminal, logfmt otherwise.
    public var logFormat: LogFormat?
    /// Section `event_log`; nil without `event_log.path`.
    public var eventLog: EventLogConfiguration?
    /// Key `metrics.listen`: `HOST:PORT` for `/metrics` over TCP. Default: off.
    public var metricsListen: String?
    /// Section `webhooks`: one endpoint per name. Default: none.
    public var webhooks: [WebhookEndpoint]
    /// Section `access`: who may see what on the socket. Default: none, so
    /// whoever the socket's mode and group let in sees every table.
    public var access: AccessPolicy?
    /// Section `realtime`: Supabase Realtime clients. Default: on the socket
    /// only, no keys, so socket peers under `access`.
    public var realtime: RealtimeConfiguration
    /// Things worth saying that do not stop the daemon.
    public var warnings: [String]
    /// Every setting as it is in force, with its source, for `check-config`.
    public var effective: [EffectiveSetting]
}
