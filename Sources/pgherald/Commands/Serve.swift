import ArgumentParser
import Foundation
import Herald
import HeraldConfiguration
import HeraldOutput
import HeraldPostgres
import HeraldService
import HeraldSettings
import Logging
import Metrics
import Prometheus
import ServiceLifecycle

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "LISTEN for changes and deliver them to subscribers.",
        discussion: """
            Connects once, LISTENs on the channel the triggers notify (see `pgherald install`), \
            and fans every event out. If the first connection fails, serve exits with an error; \
            once running, it reconnects with capped exponential backoff (0.25 s doubling to 30 s, \
            with jitter). In durable mode (the default install) it then catches up from the journal, \
            so nothing committed in between is lost, and it records its progress under --name. \
            SIGINT or SIGTERM shut it down after delivering what it has received and recording \
            exactly where it stopped. A bad configuration exits 78 (EX_CONFIG), and so does a \
            configuration file that names no database while neither PGHERALD_DATABASE, --db nor a \
            libpq variable such as PGHOST does: the packaged file ships that way, so an installed \
            service stays down until someone sets database:.
            """
    )

    @Option(help: ArgumentHelp(
        "The configuration file.",
        discussion: "Default: \(ConfigurationSources.defaultFile), if it exists. Settings come from this file, then PGHERALD_* environment variables (socket.max_subscribers is PGHERALD_SOCKET_MAX_SUBSCRIBERS), then these flags, each overriding the one before. `pgherald check-config` shows the result. systemd/pgherald.yaml lists every key.",
        valueName: "file"
    ))
    var config: String?

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var logging: LoggingOptions

    @Option(help: "Print events to stdout: none (default), json (one event per line, the shared shape) or pretty. Key: stdout.")
    var stdout: StdoutChoice?

    @Option(name: .customLong("listen-db"), help: ArgumentHelp(
        "The listener's own conninfo, for a --db that goes through a transaction pooler. Key: listen_database.",
        discussion: "LISTEN needs a session of its own, which a pooler in transaction or statement mode does not keep: serve refuses to listen through one. With this, the listener (LISTEN, catch-up, checkpoints) connects here, straight to PostgreSQL or through a session-mode pool, while the other queries use --db. Default: none, the listener uses --db.",
        valueName: "conninfo"
    ))
    var listenDB: String?

    /// Retired: the install chooses the channel. Accepted, with a warning, so that old unit files still start.
    @Option(help: .hidden)
    var channel: String?

    @Option(help: ArgumentHelp(
        "durable or notify-only; must match `pgherald install --durability`. Key: durability.",
        discussion: "Default: whatever the database was installed with. Durable mode catches up from the journal after any gap, so nothing committed is lost.",
        valueName: "durable|notify-only"
    ))
    var durability: Durability?

    @Option(help: "This daemon's name, under which it records its progress in the database, so that several daemons can share one; one name runs once per database. Default: default. Key: name.")
    var name: String?

    @Option(help: ArgumentHelp(
        "How long delivered events stay in the journal at least (durable mode), such as 24h, 90m or 7d; at most twice that, as the journal is emptied a half at a time. Socket clients can resume from an event this old. Default: 24h. Key: retention.",
        valueName: "duration"
    ))
    var retention: String?

    @Option(help: ArgumentHelp("Time between journal maintenance runs, which empty and turn the journal's parts. Default: 60s. Key: prune_interval.", valueName: "duration"))
    var pruneInterval: String?

    @Option(help: "Recent events kept in memory for socket clients that resume with Last-Event-ID (also capped at 96 MiB, about 110,000 events of a 100-byte row). Older resumes are read from the journal. Default: 100000. Key: history.")
    var history: Int?

    @Option(help: "Events a subscriber may fall behind before it is dropped. Default: 4096. Key: mailbox_capacity.")
    var mailboxCapacity: Int?

    @Option(help: ArgumentHelp("Time allowed for connecting and running LISTEN, and for a probe to come back. Default: 10s. Key: connect_timeout.", valueName: "duration"))
    var connectTimeout: String?

    @Option(help: ArgumentHelp(
        "The longest a stop on SIGTERM or SIGINT takes, whatever clients, endpoints and servers do. Default: 5s. Key: stop_grace.",
        discussion: "The listener records its final checkpoint first. A second before the end, whatever is still stopping (a client that never reads, a webhook that never answers) is cancelled; at the end the daemon exits regardless. Durable outputs resume from their cursors at the next start, so nothing is lost.",
        valueName: "duration"
    ))
    var stopGrace: String?

    @Option(help: ArgumentHelp(
        "How often the listener sends itself a probe notification, to prove that notifications still reach it. Default: 30s. Key: probe_interval.",
        discussion: "The first probe goes right after LISTEN. One not back within the connect timeout means the path is broken even if the socket is open (a proxy or NAT that dropped it, a server behind a pooler): /healthz turns unhealthy, the listener logs why, counts it in pgherald_listener_probe_failures_total and reconnects, and durable mode catches up from the journal.",
        valueName: "duration"
    ))
    var probeInterval: String?

    @Option(help: ArgumentHelp(
        "How often a parked durable listener reads the journal for events whose notification never came. Default: 10s. Key: backstop_interval.",
        discussion: "In durable mode the listener reads the journal while events flow and parks when they stop; writers then notify to wake it (the doorbell). Parked, it reads the journal this often anyway, up to a snapshot its own tick confirmed, so an event whose notification was lost still arrives. Events only this finds are counted in pgherald_journal_backstop_events_total, which should stay 0.",
        valueName: "duration"
    ))
    var backstopInterval: String?

    @OptionGroup(title: "Socket") var socketPath: SocketPathOption

    @Flag(help: "Do not serve the Unix socket. Key: socket.enabled.")
    var noSocket = false

    @Option(help: "Permissions of the socket file, in octal. Default: 660. Key: socket.mode.")
    var socketMode: String?

    @Option(help: "Group to own the socket file, so its members may connect. Default: the daemon's group. Key: socket.group.")
    var socketGroup: String?

    @Option(help: "Concurrent event streams on the socket; more get 503. Default: 10000. Key: socket.max_subscribers.")
    var maxSubscribers: Int?

    @Option(help: "Events a socket stream may fall behind live before it reads on from the resume history (--history); only behind that does it get `event: overflow` and close. Default: 4096. Key: socket.subscriber_buffer.")
    var subscriberBuffer: Int?

    @Option(help: ArgumentHelp("Time between heartbeats on idle socket streams. Default: 15s. Key: socket.heartbeat_interval.", valueName: "duration"))
    var heartbeatInterval: String?

    @Option(help: ArgumentHelp(
        "The most writes per second to spend on all socket streams together; 0: no ceiling. Default: 0. Key: socket.write_rate.",
        discussion: "Streams are written at once while the daemon has headroom. A write costs a system call and a wake-up of the client whatever its size, so once writing keeps an event loop more than half busy, its streams are written at most every 1 ms, doubling up to 32 ms while it stays busy, and the events that arrive meanwhile go out together. A rate adds a fixed floor under that spacing: each stream is then written at most every (open streams / write rate) seconds, 2 ms with 100 streams at 50000, 20 ms with 1000."
    ))
    var writeRate: Int?

    @Option(help: ArgumentHelp(
        "Append every event to this file as one JSON line. Default: off. Key: event_log.path (with event_log.sync, sync_interval, max_size, keep and feed in the file; feed: durable, the default, reads the journal through its own cursor and loses nothing; feed: live is a broker subscriber).",
        valueName: "path"
    ))
    var eventLog: String?

    @Option(help: ArgumentHelp("Serve GET /metrics over TCP on HOST:PORT as well as on the socket. Default: off. Key: metrics.listen.", valueName: "host:port"))
    var metricsListen: String?

    /// The flags given, by the setting key they set.
    var flags: [String: ConfigurationSources.Flag] {
        let given: [(String, String, String?)] = [
            ("database", "--db", database.db),
            ("listen_database", "--listen-db", listenDB),
            ("log.level", "--log-level", logging.logLevel),
            ("log.format", "--log-format", logging.logFormat?.rawValue),
            ("stdout", "--stdout", stdout?.rawValue),
            ("channel", "--channel", channel),
            ("durability", "--durability", durability?.rawValue),
            ("name", "--name", name),
            ("retention", "--retention", retention),
            ("prune_interval", "--prune-interval", pruneInterval),
            ("history", "--history", history.map(String.init)),
            ("mailbox_capacity", "--mailbox-capacity", mailboxCapacity.map(String.init)),
            ("connect_timeout", "--connect-timeout", connectTimeout),
            ("probe_interval", "--probe-interval", probeInterval),
            ("backstop_interval", "--backstop-interval", backstopInterval),
            ("stop_grace", "--stop-grace", stopGrace),
            ("socket.path", "--socket", socketPath.socket),
            ("socket.enabled", "--no-socket", noSocket ? "false" : nil),
            ("socket.mode", "--socket-mode", socketMode),
            ("socket.group", "--socket-group", socketGroup),
            ("socket.max_subscribers", "--max-subscribers", maxSubscribers.map(String.init)),
            ("socket.subscriber_buffer", "--subscriber-buffer", subscriberBuffer.map(String.init)),
            ("socket.heartbeat_interval", "--heartbeat-interval", heartbeatInterval),
            ("socket.write_rate", "--write-rate", writeRate.map(String.init)),
            ("event_log.path", "--event-log", eventLog),
            ("metrics.listen", "--metrics-listen", metricsListen),
        ]
        return Dictionary(uniqueKeysWithValues: given.compactMap { key, flag, value in
            value.map { (key, ConfigurationSources.Flag(name: flag, value: $0)) }
        })
    }

    var sources: ConfigurationSources {
        ConfigurationSources(
            file: config ?? ConfigurationSources.defaultFile,
            fileRequired: config != nil,
            environment: ProcessInfo.processInfo.environment,
            flags: flags
        )
    }

    func run() async throws {
        let settings = try await DaemonConfiguration.loadOrExit(from: sources)
        if let file = settings.fileNamingNoDatabase(sources) {
            FileHandle.standardError.write(Data("Error: configuration: \(DaemonConfiguration.notSetUp(file)); serve does not start until it does\n".utf8))
            throw ExitCode(ConfigurationError.exitCode)
        }
        // What the daemon creates (the event log) is not for other users; the socket's mode is set explicitly.
        umask(0o027)
        LoggingSetup.bootstrap(.init(levels: settings.logLevels, format: settings.logFormat), environment: ProcessInfo.processInfo.environment)
        let lifecycle = LogCategory.lifecycle.logger
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(DaemonMetrics.factory(for: registry))
        let daemon = try Daemon(
            settings: settings, sources: sources, registry: registry, environment: ProcessInfo.processInfo.environment,
            version: PGHerald.configuration.version
        )
        var configuration = ServiceGroupConfiguration(services: daemon.services, gracefulShutdownSignals: [.sigterm, .sigint], logger: lifecycle)
        configuration.maximumGracefulShutdownDuration = StopDeadline.cancellation(grace: settings.stopGrace)
        let group = ServiceGroup(configuration: configuration)
        lifecycle.info("starting", metadata: [
            "database": "\(settings.database)", "version": "\(PGHerald.configuration.version)",
            "config": "\(sources.file.map { FileManager.default.fileExists(atPath: $0) ? $0 : "none" } ?? "none")",
        ])
        for warning in settings.warnings { lifecycle.warning("\(warning)") }
        do {
            try await group.run()
        } catch {
            // The one line that says why, first of all; StopDeadline prints it instead if the stop overruns.
            daemon.failures.print(error)
            throw ExitCode(FirstFailure.exitCode(for: error))
        }
        lifecycle.info("stopped", metadata: ["events": "\(daemon.broker.statistics.changeCount)"])
    }
}
