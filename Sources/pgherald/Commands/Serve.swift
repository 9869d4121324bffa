import ArgumentParser
import Foundation
import Herald
import HeraldPostgres
import HeraldServer
import Logging
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
            exactly where it stopped.
            """
    )

    enum StdoutChoice: String, ExpressibleByArgument, CaseIterable {
        case none, json, pretty
    }

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var logging: LoggingOptions

    @Option(help: "Print events to stdout: none, json (one event per line, the shared shape) or pretty.")
    var stdout: StdoutChoice = .none

    @Option(help: "Channel the triggers notify on.")
    var channel = "pgherald"

    @Option(help: ArgumentHelp(
        "durable or notify-only; must match `pgherald install --durability`.",
        discussion: "Default: whatever the database was installed with. Durable mode catches up from the journal after any gap, so nothing committed is lost.",
        valueName: "durable|notify-only"
    ))
    var durability: Durability?

    @Option(help: "This daemon's name, under which it records its progress in the database, so that several daemons can share one. Default: default.")
    var name = "default"

    @Option(help: ArgumentHelp(
        "How long delivered events stay in the journal (durable mode), such as 24h, 90m or 7d. Socket clients can resume from an event this old.",
        valueName: "duration"
    ))
    var retention = HumanDuration(argument: "24h")!

    @Option(help: ArgumentHelp("Time between journal pruning runs.", valueName: "duration"))
    var pruneInterval = HumanDuration(argument: "60s")!

    @Option(help: "Recent events kept in memory for socket clients that resume with Last-Event-ID (also capped at 64 MiB). Older resumes are read from the journal.")
    var history = 100_000

    @Option(help: "Events a subscriber may fall behind before it is dropped.")
    var mailboxCapacity = 4096

    @Option(help: "Seconds allowed for connecting and running LISTEN.")
    var connectTimeout = 10.0

    @OptionGroup(title: "Socket") var socketPath: SocketPathOption

    @Flag(help: "Do not serve the Unix socket.")
    var noSocket = false

    @Option(help: "Permissions of the socket file, in octal.")
    var socketMode = "660"

    @Option(help: "Group to own the socket file, so its members may connect. Default: the daemon's group.")
    var socketGroup: String?

    @Option(help: "Concurrent event streams on the socket; more get 503.")
    var maxSubscribers = 10_000

    @Option(help: "Events a socket stream may fall behind before it gets `event: overflow` and is closed.")
    var subscriberBuffer = 4096

    @Option(help: "Seconds between heartbeats on idle socket streams.")
    var heartbeatInterval = 15.0

    @Option(help: ArgumentHelp(
        "Writes per second to spend on all socket streams together; 0 writes every batch at once.",
        discussion: "Each stream is written at most every (open streams / write rate) seconds, and the events that arrive meanwhile go out together: 2 ms apart with 100 streams, 20 ms with 1000. A write costs a system call and a wake-up of the client whatever its size, so at high fan-out this keeps the daemon from spending the machine on writes."
    ))
    var writeRate = 50_000

    func validate() throws {
        let batch = PostgresListener.maximumBatch
        guard mailboxCapacity >= batch else {
            throw ValidationError("--mailbox-capacity must be at least \(batch): the listener hands over up to \(batch) events at once")
        }
        guard connectTimeout > 0 else { throw ValidationError("--connect-timeout must be positive") }
        guard !name.isEmpty else { throw ValidationError("--name must not be empty") }
        guard history >= 0 else { throw ValidationError("--history must not be negative") }
        guard let mode = mode_t(socketMode, radix: 8), mode <= 0o777 else {
            throw ValidationError("--socket-mode must be octal permissions such as 660, not '\(socketMode)'")
        }
        guard mode & 0o600 == 0o600 else { throw ValidationError("--socket-mode must let the owner read and write (at least 600)") }
        guard maxSubscribers > 0 else { throw ValidationError("--max-subscribers must be at least 1") }
        guard subscriberBuffer >= batch else {
            throw ValidationError("--subscriber-buffer must be at least \(batch): the listener hands over up to \(batch) events at once")
        }
        guard heartbeatInterval > 0 else { throw ValidationError("--heartbeat-interval must be positive") }
        guard writeRate >= 0 else { throw ValidationError("--write-rate must not be negative (0 writes every batch at once)") }
    }

    func run() async throws {
        try logging.bootstrap()
        let lifecycle = LogCategory.lifecycle.logger
        let connection = try database.connectionString()
        let broker = Broker(configuration: .init(mailboxCapacity: mailboxCapacity, historyCapacity: history))

        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        let format: StdoutFormat? = switch stdout {
        case .none: nil
        case .json: .json
        case .pretty: .pretty
        }
        if let format {
            let output = StdoutOutput(broker: broker, format: format, logger: LogCategory.broker.logger)
            services.append(.init(service: output, successTerminationBehavior: .gracefullyShutdownGroup))
        }
        let listener = PostgresListener(
            configuration: .init(
                connection: connection, channel: channel, connectTimeout: .seconds(connectTimeout),
                durability: durability, name: name
            ),
            broker: broker,
            logger: LogCategory.database.logger
        )
        let maintenance = JournalMaintenance(
            configuration: .init(retention: retention.duration, interval: pruneInterval.duration),
            connection: connection,
            daemon: name,
            listener: listener,
            logger: LogCategory.database.logger
        )
        // Idle in notify-only mode.
        services.append(.init(service: maintenance, successTerminationBehavior: .ignore))
        if !noSocket {
            // Files the daemon creates are not for other users; the socket's mode is set explicitly.
            umask(0o007)
            raiseOpenFileLimit(toServe: maxSubscribers, logger: lifecycle)
            let server = SocketServer(
                configuration: SocketConfiguration(
                    path: socketPath.path,
                    mode: mode_t(socketMode, radix: 8)!,
                    group: socketGroup,
                    maximumSubscribers: maxSubscribers,
                    subscriberBuffer: subscriberBuffer,
                    heartbeatInterval: .milliseconds(Int64(heartbeatInterval * 1000)),
                    writeRate: writeRate == 0 ? nil : writeRate
                ),
                broker: broker,
                listener: listener,
                catalog: SchemaCatalog(connection: connection, logger: LogCategory.socket.logger),
                journal: JournalReader(connection: connection, daemon: name),
                maintenance: maintenance,
                version: PGHerald.configuration.version,
                logger: LogCategory.socket.logger
            )
            services.append(.init(service: server, successTerminationBehavior: .gracefullyShutdownGroup))
        }
        // Last, so that on shutdown it stops first and the outputs drain after it.
        services.append(.init(service: listener, successTerminationBehavior: .gracefullyShutdownGroup))

        let group = ServiceGroup(
            configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: lifecycle)
        )
        lifecycle.info("starting", metadata: ["database": "\(connection)", "channel": "\(channel)", "version": "\(PGHerald.configuration.version)"])
        if let warning = database.passwordWarning(for: connection) { lifecycle.warning("\(warning)") }
        try await group.run()
        lifecycle.info("stopped", metadata: ["events": "\(broker.statistics.changeCount)"])
    }
}

/// Each stream holds a descriptor; raise the soft limit as far as the hard
/// limit allows, and say so when even that is too low.
private func raiseOpenFileLimit(toServe streams: Int, logger: Logger) {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
    let wanted = rlim_t(streams + 256)
    if limit.rlim_cur < wanted {
        limit.rlim_cur = min(wanted, limit.rlim_max)
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
    if limit.rlim_cur < wanted {
        logger.warning("the open-file limit is below what --max-subscribers needs", metadata: [
            "limit": "\(limit.rlim_cur)", "needed": "\(wanted)",
        ])
    }
}
