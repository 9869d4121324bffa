import ArgumentParser
import Herald
import HeraldCluster
import HeraldConfiguration
import HeraldOutput
import HeraldPostgres
import HeraldService
import HeraldSettings
import Logging
import Prometheus
import ServiceLifecycle

/// The daemon `serve` runs, built from its settings and not yet started:
/// the event source, the broker, the row-security gate, the outputs, and
/// the services that run them in order. Building it connects to nothing
/// and listens nowhere, so what a configuration turns into can be tested.
struct Daemon {
    let broker: Broker
    /// The journal's listener: the source itself on a database daemon; on an edge it never runs.
    let listener: PostgresListener
    let source: any EventSource
    let maintenance: JournalMaintenance
    let rowSecurity: RowSecurityGate
    let outputs: OutputDirectory
    /// The first service that failed: why a failed run stops.
    let failures = FirstFailure()
    /// The long-lived parts, in start order; a graceful shutdown stops them in reverse.
    let parts: [any Service]
    /// The parts as the service group runs them: a failure of one stops the others.
    let services: [ServiceGroupConfiguration.ServiceConfiguration]

    /// - Parameter registry: where `/metrics` reads from; the caller bootstraps the metrics system with it once.
    init(
        settings: DaemonConfiguration, sources: ConfigurationSources, registry: PrometheusCollectorRegistry,
        environment: [String: String], version: String
    ) throws {
        let connection = settings.database
        broker = Broker(configuration: .init(mailboxCapacity: settings.mailboxCapacity, historyCapacity: settings.history))
        listener = PostgresListener(configuration: .init(
            connection: settings.listenDatabase ?? connection, connectTimeout: settings.connectTimeout,
            durability: settings.durability, name: settings.name, probeInterval: settings.probeInterval,
            backstopInterval: settings.backstopInterval
        ), broker: broker, logger: LogCategory.database.logger)
        source = Self.source(settings: settings, broker: broker, listener: listener, version: version)
        maintenance = JournalMaintenance(
            configuration: .init(retention: settings.retention, interval: settings.pruneInterval),
            connection: connection, daemon: settings.name, listener: listener, logger: LogCategory.database.logger
        )
        rowSecurity = RowSecurityGate(
            configuration: .init(mailboxCapacity: settings.mailboxCapacity), broker: broker, database: connection, logger: LogCategory.broker.logger
        )
        outputs = OutputDirectory()
        let metrics = DaemonMetrics(
            registry: registry, broker: broker, health: source.health, listener: listener, maintenance: maintenance, outputs: outputs, rowSecurity: rowSecurity
        )
        let context = OutputContext(
            broker: broker, listener: listener, source: source, database: connection, daemonName: settings.name, version: version,
            catalog: SchemaCatalog(connection: connection, logger: LogCategory.socket.logger),
            journal: JournalReader(connection: connection, daemon: settings.name, deliveries: listener.deliveries), maintenance: maintenance, metrics: metrics,
            access: settings.access, rowSecurity: rowSecurity, outputs: outputs, logger: LogCategory.lifecycle.logger
        )
        let notifier = SystemdNotifier(environment: environment)

        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        // Idle in notify-only mode; an edge has no journal to maintain.
        if source.offers.contains(.journal) { services.append(.init(service: maintenance, successTerminationBehavior: .ignore)) }
        services.append(.init(service: rowSecurity, successTerminationBehavior: .ignore))
        if let address = settings.metricsListen {
            guard let server = MetricsServer(
                address: address, metrics: metrics, health: source.health, maintenance: maintenance, outputs: outputs, logger: LogCategory.lifecycle.logger
            ) else { throw ValidationError("metrics.listen: '\(address)' is not HOST:PORT") }
            services.append(.init(service: server, successTerminationBehavior: .gracefullyShutdownGroup))
        }
        for output in try Self.outputs(settings: settings, context: context) {
            services.append(.init(service: output, successTerminationBehavior: .gracefullyShutdownGroup))
        }
        services.append(.init(service: ConfigurationReloader(
            sources: sources, current: settings, registry: .standard, outputs: outputs, notifier: notifier, logger: LogCategory.config.logger
        )))
        // Near the end, so that on shutdown the listener (or an edge's feed) stops before the outputs drain.
        services.append(.init(service: source, successTerminationBehavior: .gracefullyShutdownGroup))
        // Late, so that STOPPING=1 goes out first.
        services.append(.init(service: SystemdService(
            configuration: .init(
                watchdogInterval: SystemdNotifier.watchdogInterval(environment: environment),
                stallLimit: settings.connectTimeout + .seconds(5)
            ),
            notifier: notifier, health: source.health, broker: broker, outputs: outputs, logger: LogCategory.lifecycle.logger
        )))
        let journal = context.journal
        services.append(.init(service: HeapTrimmer(activity: { [broker, rowSecurity] in
            let replays = journal.statistics
            return [
                UInt64(broker.statistics.subscriberCount),
                UInt64(rowSecurity.currentStatistics.cohorts), UInt64(rowSecurity.subscribersByKind.values.reduce(0, +)),
                replays.pagesRead + replays.pagesShared, UInt64(journal.keptPageBytes),
            ]
        }, changes: { [broker] in broker.statistics.changeCount }), successTerminationBehavior: .ignore))
        // Last of all, so that it hears the stop first and bounds it.
        services.append(.init(
            service: StopDeadline(grace: settings.stopGrace, failures: failures, logger: LogCategory.lifecycle.logger), successTerminationBehavior: .ignore
        ))
        parts = services.map(\.service)
        // A failure stops the others as SIGTERM does, within stop_grace: cancelled, servers log
        // errors of their own, and a service that ignored cancellation would hold the daemon.
        self.services = services.map { [failures] service in
            var service = service
            service.service = failures.watching(service.service)
            service.failureTerminationBehavior = .gracefullyShutdownGroup
            return service
        }
    }

    /// An edge's feed from the cluster's stream (`source: nats`); else the listener.
    static func source(settings: DaemonConfiguration, broker: Broker, listener: PostgresListener, version: String) -> any EventSource {
        guard settings.source == .nats, let edge = settings[ClusterLink.self], let stream = edge.stream else { return listener }
        return EdgeFeed(
            configuration: edge, stream: stream, broker: broker, history: settings.history,
            version: version, logger: LogCategory.cluster.logger
        )
    }

    /// Every output the registry lists and the settings turn on, in the registry's order.
    static func outputs(settings: DaemonConfiguration, context: OutputContext) throws -> [any Output] {
        var built: [any Output] = []
        for kind in OutputRegistry.standard.kinds {
            guard let configuration = settings.outputs[kind.section] else { continue }
            var own = context
            own.logger = kind.makeLogger()
            do {
                let output = try kind.makeOutput(configuration, context: own)
                // Later outputs find the earlier ones (the Supabase endpoint finds the cluster link).
                context.outputs.add(output)
                built.append(output)
            } catch {
                context.logger.error("an output cannot start", metadata: ["output": "\(kind.section)", "error": "\(error)"])
                throw error
            }
        }
        return built
    }
}
