public import HeraldHTTP
public import Herald
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
public import Logging
public import ServiceLifecycle

/// Supabase Realtime over TCP (`realtime.listen`): only `/realtime/v1/websocket`,
/// and only for callers with a key or token from `realtime.keys` or `realtime.jwt`.
public struct RealtimeServer: Service {
    let address: ListenAddress
    let endpoint: RealtimeEndpoint
    let health: SourceHealth
    let logger: Logger

    public init(address: ListenAddress, endpoint: RealtimeEndpoint, health: SourceHealth, logger: Logger) {
        self.address = address
        self.endpoint = endpoint
        self.health = health
        self.logger = logger
    }

    public func run() async throws {
        // As the socket does: bind once the database has answered, so a failing start shows only its own error.
        guard await health.waitUntilConnected() else {
            try? await gracefulShutdown()
            return
        }
        let router = Router(context: SocketRequestContext.self)
        endpoint.addRoutes(to: router, transport: .tcp)
        let connections = endpoint.configuration.addressLimit.counter(limit: endpoint.configuration.maximumConnections, key: "realtime")
        let application = Application(
            router: router,
            server: endpoint.server(connections: connections, idleTimeout: .seconds(10), transport: .tcp),
            configuration: .init(address: .hostname(address.host, port: address.port), serverName: "pgherald"),
            onServerRunning: { [logger, address] _ in logger.info("serving Supabase Realtime over TCP", metadata: ["address": "\(address)"]) },
            logger: logger.forHummingbird
        )
        try await ListeningApplication(application: application, key: "realtime.listen", address: address).run()
    }
}
