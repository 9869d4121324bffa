public import Herald
import HeraldHTTP
public import HeraldOutput
public import HeraldPostgres
import Hummingbird
public import Logging
public import ServiceLifecycle

/// `GET /metrics` (and `/healthz`) over TCP, for a Prometheus that cannot reach the Unix socket (`metrics.listen`).
public struct MetricsServer: Service {
    let address: ListenAddress
    let metrics: DaemonMetrics
    let health: SourceHealth
    let maintenance: JournalMaintenance?
    let outputs: OutputDirectory
    let logger: Logger

    /// - Parameter address: `HOST:PORT`, `[::1]:PORT` for IPv6.
    public init?(address: String, metrics: DaemonMetrics, health: SourceHealth, maintenance: JournalMaintenance?, outputs: OutputDirectory, logger: Logger) {
        guard let address = ListenAddress(address) else { return nil }
        self.address = address
        self.metrics = metrics
        self.health = health
        self.maintenance = maintenance
        self.outputs = outputs
        self.logger = logger
    }

    public func run() async throws {
        // As the socket does: bind once the database has answered, so a failing start shows only its own error.
        guard await health.waitUntilConnected() else {
            try? await gracefulShutdown()
            return
        }
        let router = Router()
        router.get("metrics") { [metrics, maintenance] _, _ in
            metrics.response(journal: await maintenance?.statistics(maximumAge: .seconds(2)))
        }
        router.get("healthz") { [health, outputs] _, _ -> HTTPResponse.Status in
            health.status == .listening && outputs.starting.isEmpty ? .ok : .serviceUnavailable
        }
        let application = Application(
            router: router,
            configuration: .init(address: .hostname(address.host, port: address.port), serverName: "pgherald"),
            onServerRunning: { [logger, address] _ in logger.info("serving metrics over TCP", metadata: ["address": "\(address)"]) },
            logger: logger.forHummingbird
        )
        try await ListeningApplication(application: application, key: "metrics.listen", address: address).run()
    }
}
