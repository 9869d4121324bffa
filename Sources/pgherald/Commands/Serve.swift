import ArgumentParser
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
            with jitter). SIGINT or SIGTERM shut it down after delivering what it has received.
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

    @Option(help: "Events a subscriber may fall behind before it is dropped.")
    var mailboxCapacity = 4096

    @Option(help: "Seconds allowed for connecting and running LISTEN.")
    var connectTimeout = 10.0

    func validate() throws {
        guard mailboxCapacity > 0 else { throw ValidationError("--mailbox-capacity must be at least 1") }
        guard connectTimeout > 0 else { throw ValidationError("--connect-timeout must be positive") }
    }

    func run() async throws {
        try logging.bootstrap()
        let lifecycle = LogCategory.lifecycle.logger
        let connection = try database.connectionString()
        let broker = Broker(configuration: .init(mailboxCapacity: mailboxCapacity))

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
        // Last, so that on shutdown it stops first and the outputs drain after it.
        let listener = PostgresListener(
            configuration: .init(connection: connection, channel: channel, connectTimeout: .seconds(connectTimeout)),
            broker: broker,
            logger: LogCategory.database.logger
        )
        services.append(.init(service: listener, successTerminationBehavior: .gracefullyShutdownGroup))

        let group = ServiceGroup(
            configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: lifecycle)
        )
        lifecycle.info("starting", metadata: ["database": "\(connection)", "channel": "\(channel)", "version": "\(PGHerald.configuration.version)"])
        try await group.run()
        lifecycle.info("stopped", metadata: ["events": "\(broker.statistics.changeCount)"])
    }
}
