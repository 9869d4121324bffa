import Foundation
public import Herald
public import HeraldPostgres
public import HeraldRealtime
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
public import Logging
import NIOCore
import Synchronization

/// Supabase Realtime's `postgres_changes` protocol at `/realtime/v1/websocket`:
/// existing Supabase clients subscribe to pgherald with their realtime URL
/// pointed at it.
///
/// One endpoint serves the Unix socket and the optional TCP listener. Each
/// joined channel is one broker subscriber of kind `realtime`, filtered by
/// its bindings under its caller's grant.
public final class RealtimeEndpoint: Sendable {
    public static let path = "/realtime/v1/websocket"

    public let configuration: RealtimeConfiguration
    let broker: Broker
    let catalog: SchemaCatalog
    let metrics: DaemonMetrics?
    let logger: Logger
    let cache: ChangeDataCache
    /// Replaced on reload; joins and token pushes after it see the new keys.
    let credentials: Mutex<RealtimeCredentials>
    let openChannels = Mutex(0)
    let resumeBook: Mutex<ResumeBook>

    public init(configuration: RealtimeConfiguration, broker: Broker, catalog: SchemaCatalog, metrics: DaemonMetrics? = nil, logger: Logger) {
        self.configuration = configuration
        self.broker = broker
        self.catalog = catalog
        self.metrics = metrics
        self.logger = logger
        cache = ChangeDataCache(catalog: catalog)
        credentials = Mutex(configuration.credentials)
        resumeBook = Mutex(ResumeBook(window: configuration.resumeWindow))
    }

    /// Frames as large as a client may send; the server pings idle sockets every 30 s.
    var webSocketConfiguration: WebSocketServerConfiguration {
        WebSocketServerConfiguration(maxFrameSize: configuration.maximumMessageSize, autoPing: .enabled(timePeriod: .seconds(30)))
    }

    /// Applies reloaded keys and token settings to later connections, joins and token pushes.
    public func apply(credentials: RealtimeCredentials) {
        self.credentials.withLock { $0 = credentials }
    }

    /// Where a connection came from, which decides how it may authenticate.
    enum Transport: Sendable {
        /// The Unix socket: without keys configured, the peer's `access:` grant applies.
        case unixSocket(peer: @Sendable (any Channel) async -> RealtimeCaller)
        /// The TCP listener: a key or token is always required.
        case tcp
    }

    /// The outcome of an upgrade request's checks.
    enum Admission {
        case accepted(PhoenixFraming, RealtimeCaller)
        case refused(HTTPResponse.Status, ErrorBody)
    }

    /// Checks `vsn` and the caller's key for a request to ``path``.
    func admit(query: [(name: String, value: String)], headers: HTTPFields, channel: any Channel, transport: Transport) async -> Admission {
        let vsn = query.last { $0.name == "vsn" }?.value
        guard let framing = PhoenixFraming(vsn: vsn) else {
            return .refused(.badRequest, ErrorBody(code: "unknown_vsn", message: "vsn is 1.0.0 or 2.0.0, not '\(vsn?.prefix(20) ?? "")'"))
        }
        let presented = query.last { $0.name == "apikey" }?.value ?? headers[HTTPField.Name("x-api-key")!]
        let credentials = self.credentials.withLock { $0 }
        if case .unixSocket(let peer) = transport, credentials.isEmpty {
            // No keys to check: clients still send their project's key, and the peer's grant decides.
            return .accepted(framing, await peer(channel))
        }
        guard !credentials.isEmpty else {
            return .refused(.unauthorized, ErrorBody(code: "no_keys", message: "realtime over TCP needs realtime.keys or realtime.jwt in the config file"))
        }
        do {
            let identity = try credentials.identify(presented ?? "", now: Date().timeIntervalSince1970)
            return .accepted(framing, RealtimeCaller(identity, presentedKey: presented))
        } catch {
            return .refused(.unauthorized, ErrorBody(code: error.code.rawValue, message: error.message))
        }
    }

    /// The WebSocket upgrade decision for `transport`: ours only for ``path``
    /// with an accepted key; anything else goes on to the HTTP routes, where
    /// ``addRoutes(to:transport:)`` answers a refused upgrade with its status.
    func shouldUpgrade(
        _ transport: Transport
    ) -> @Sendable (HTTPRequest, any Channel, Logger) async throws -> ShouldUpgradeResult<WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>> {
        { request, channel, _ in
            let uri = URI(request.path ?? "")
            guard uri.path == Self.path else { return .dontUpgrade }
            let query = uri.queryParameters.map { (name: String($0.key), value: String($0.value)) }
            guard case .accepted(let framing, let caller) = await self.admit(query: query, headers: request.headerFields, channel: channel, transport: transport) else {
                return .dontUpgrade
            }
            return .upgrade([:]) { inbound, outbound, _ in
                let connection = RealtimeConnection(endpoint: self, framing: framing, caller: caller, outbound: outbound)
                await connection.run(inbound)
            }
        }
    }

    /// `GET /realtime/v1/websocket` that was not upgraded: the refusal's status
    /// (401 for a missing or wrong key), or 426 for a plain HTTP request.
    func addRoutes<Context: RequestContext>(to router: Router<Context>, transport: Transport, channel: @escaping @Sendable (Context) -> any Channel) {
        router.get(RouterPath(stringLiteral: String(Self.path.dropFirst()))) { request, context in
            let query = request.uri.queryParameters.map { (name: String($0.key), value: String($0.value)) }
            switch await self.admit(query: query, headers: request.headers, channel: channel(context), transport: transport) {
            case .refused(let status, let body):
                self.metrics?.recordRefusal(status: status.code)
                self.logger.notice("refused a realtime connection", metadata: ["status": "\(status.code)", "reason": "\(body.message)"])
                return Response.json(status, body)
            case .accepted:
                return Response.json(.upgradeRequired, ErrorBody(code: "websocket_required", message: "\(Self.path) speaks WebSocket (Supabase Realtime)"))
            }
        }
    }

    /// Takes a channel slot, or returns false when ``RealtimeConfiguration/maximumChannels`` are open.
    func reserveChannel() -> Bool {
        openChannels.withLock { count in
            guard count < configuration.maximumChannels else { return false }
            count += 1
            return true
        }
    }

    func releaseChannel() {
        openChannels.withLock { $0 -= 1 }
    }
}

/// Who is on the other end of a realtime socket or channel, and what it may see.
struct RealtimeCaller: Sendable {
    var name: String
    var scope: AccessScope
    /// A token's expiry, in seconds since 1970.
    var expiresAt: Double?
    /// The socket's `apikey`, so a join repeating it as `access_token` is not checked twice.
    var presentedKey: String?

    init(name: String, scope: AccessScope, expiresAt: Double?, presentedKey: String?) {
        self.name = name
        self.scope = scope
        self.expiresAt = expiresAt
        self.presentedKey = presentedKey
    }

    init(_ identity: RealtimeIdentity, presentedKey: String?) {
        self.init(name: identity.name, scope: identity.scope, expiresAt: identity.expiresAt, presentedKey: presentedKey)
    }
}
