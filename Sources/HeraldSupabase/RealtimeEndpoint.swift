import Foundation
public import Herald
public import HeraldCluster
package import HeraldHTTP
public import HeraldOutput
public import HeraldPostgres
public import HeraldRealtime
import HTTPTypes
package import Hummingbird
package import HummingbirdCore
import HummingbirdWebSocket
public import Logging
package import NIOCore
package import Synchronization

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
    let health: SourceHealth
    let catalog: SchemaCatalog
    /// Channels of callers under `rls: true` read their cohort's broker; nil: such callers are refused.
    let rowSecurity: RowSecurityGate?
    let metrics: DaemonMetrics?
    let logger: Logger
    let cache: ChangeDataCache
    /// Replaced on reload; joins and token pushes after it see the new keys.
    package let credentials: Mutex<RealtimeCredentials>
    /// The channels delivering now, for a reload of the access rules.
    let openChannels = Mutex<[ObjectIdentifier: RealtimeChannel]>([:])
    /// The open sockets and who opened them, so that a reload that revokes
    /// their key or token closes them: their channels alone would leave a
    /// socket that joins again.
    let openSockets = Mutex<[ObjectIdentifier: OpenSocket]>([:])

    struct OpenSocket: Sendable {
        let caller: RealtimeCaller
        /// Sends a close frame with the reason, and closes the socket.
        let close: @Sendable (String) async -> Void
    }
    let resumeBook: Mutex<ResumeBook>
    /// Change messages sent since start, over every channel.
    let delivered = Mutex<UInt64>(0)
    /// Broadcast topics and their members, here and, in a cluster, on the other members.
    let broadcasts: BroadcastHub
    /// Shares where channels stopped with the other members; nil outside a cluster.
    let cluster: ClusterLink?
    /// Told of the credentials each reload applies: the socket server ends the streams they revoke.
    private let credentialObservers = Mutex<[@Sendable (RealtimeCredentials) -> Void]>([])
    /// The REST broadcast limits of each caller, by name.
    let restLimiters = Mutex<[String: BroadcastLimiter]>([:])
    /// The connections and channels each key and user holds, within their limits.
    let consumers: Mutex<ConsumerLedger>
    /// What every socket's budget holds: frames waiting and unfinished messages.
    let heldBytes = SocketBudget.Tally()

    public init(
        configuration: RealtimeConfiguration, broker: Broker, health: SourceHealth, catalog: SchemaCatalog,
        rowSecurity: RowSecurityGate? = nil, metrics: DaemonMetrics? = nil, cluster: ClusterLink? = nil, logger: Logger
    ) {
        self.configuration = configuration
        self.broker = broker
        self.health = health
        self.catalog = catalog
        self.rowSecurity = rowSecurity
        self.metrics = metrics
        self.logger = logger
        cache = ChangeDataCache(catalog: catalog)
        credentials = Mutex(configuration.credentials)
        consumers = Mutex(ConsumerLedger(limits: configuration.consumerLimits))
        resumeBook = Mutex(ResumeBook(window: configuration.resumeWindow))
        broadcasts = BroadcastHub(relay: cluster?.relay, logger: logger)
        self.cluster = cluster
        cluster?.attach(broadcasts)
        cluster?.onResumePosition { [weak self] key, eventID in
            self?.resumeBook.withLock { $0.remember(key, after: eventID, at: .now) }
        }
    }

    /// Frames as large as a client may send; the server pings idle sockets every 30 s.
    var webSocketConfiguration: WebSocketServerConfiguration {
        WebSocketServerConfiguration(
            maxFrameSize: configuration.maximumMessageSize,
            autoPing: .enabled(timePeriod: .seconds(30))
        )
    }

    /// Applies reloaded keys and token settings to later connections, joins and token pushes.
    /// Channels admitted by a key or token that the new credentials no
    /// longer admit, or admit with another grant, end at once.
    public func apply(credentials: RealtimeCredentials) {
        self.credentials.withLock { $0 = credentials }
        let ended = revokeChannels(under: credentials)
        if ended > 0 { logger.notice("ended realtime channels whose credentials a reload revoked or changed", metadata: ["channels": "\(ended)"]) }
        let closed = closeSockets(revokedBy: credentials)
        if closed > 0 { logger.notice("closed realtime sockets whose key or token a reload revoked", metadata: ["sockets": "\(closed)"]) }
        for observer in credentialObservers.withLock({ $0 }) { observer(credentials) }
    }

    /// Calls `observer` with the credentials of every later reload.
    package func onCredentialsChange(_ observer: @escaping @Sendable (RealtimeCredentials) -> Void) {
        credentialObservers.withLock { $0.append(observer) }
    }

    /// Identifies each channel's key or token again under `credentials`; ends
    /// with a `system` error those refused now or granted otherwise. Returns how many ended.
    private func revokeChannels(under credentials: RealtimeCredentials) -> Int {
        let now = Date().timeIntervalSince1970
        var ended = 0
        for channel in openChannels.withLock({ Array($0.values) }) {
            let caller = channel.caller
            // Unix-socket peers without keys are admitted by who they are: the access rules' reload checks them.
            guard caller.peer == nil, let presented = caller.presentedKey else { continue }
            do {
                let renewed = try credentials.identify(presented, now: now)
                guard renewed.scope != caller.scope else { continue }
                channel.revoke("Unauthorized: a reload of the configuration changed what \(renewed.name) may see; join again")
            } catch {
                channel.revoke("Unauthorized: a reload of the configuration revoked this key or token: \(error.message)")
            }
            ended += 1
        }
        return ended
    }

    /// Closes the sockets opened with a key or token that `credentials` no
    /// longer admit, with close code 1008 and why. Returns how many.
    private func closeSockets(revokedBy credentials: RealtimeCredentials) -> Int {
        let now = Date().timeIntervalSince1970
        var closed = 0
        for socket in openSockets.withLock({ Array($0.values) }) {
            guard socket.caller.peer == nil, let presented = socket.caller.presentedKey else { continue }
            do {
                _ = try credentials.identify(presented, now: now)
                continue
            } catch where error.code == .expired {
                // Not the reload's doing: its joins are refused as expired.
                continue
            } catch {}
            closed += 1
            Task { await socket.close("a reload of the configuration revoked this key or token") }
        }
        return closed
    }

    /// Where a connection came from, which decides how it may authenticate.
    package enum Transport: Sendable {
        /// The Unix socket: without keys configured, the peer's `access:` grant applies.
        case unixSocket(peer: @Sendable (any Channel) async -> RealtimeCaller)
        /// The TCP listener: a key or token is always required.
        case tcp
    }

    /// The outcome of an upgrade request's checks.
    enum Admission {
        case accepted(PhoenixFraming, RealtimeCaller)
        /// A Unix-socket peer with no keys configured: its `access:` grant decides.
        case socketPeer(PhoenixFraming)
        case refused(HTTPResponse.Status, ErrorBody)
    }

    /// Checks `vsn` and the caller's key (`apikey` or the `x-api-key` header)
    /// for a request to ``path``. Synchronous, so that a refusal can be
    /// answered before the upgrade handler sees the request.
    func admit(uri: String, apiKeyHeader: String?, transport: Transport) -> Admission {
        let query = URI(uri).queryParameters
        let vsn = query["vsn"].map(String.init)
        guard let framing = PhoenixFraming(vsn: vsn) else {
            return .refused(.badRequest, ErrorBody(code: "unknown_vsn", message: "vsn is 1.0.0 or 2.0.0, not '\(vsn?.prefix(20) ?? "")'"))
        }
        let presented = query["apikey"].map(String.init) ?? apiKeyHeader
        let credentials = self.credentials.withLock { $0 }
        guard !credentials.isEmpty else {
            // No keys to check: socket clients still send their project's key, and the peer's grant decides.
            if case .unixSocket = transport { return .socketPeer(framing) }
            return .refused(.unauthorized, ErrorBody(code: "no_keys", message: "realtime over TCP needs realtime.keys or realtime.jwt in the config file"))
        }
        let identity: RealtimeIdentity
        do {
            identity = try credentials.identify(presented ?? "", now: Date().timeIntervalSince1970)
        } catch {
            return .refused(.unauthorized, ErrorBody(code: error.code.rawValue, message: error.message))
        }
        return .accepted(framing, RealtimeCaller(identity, presentedKey: presented))
    }

    /// Counts and logs a refused connection; the response says why.
    func refuse(_ status: HTTPResponse.Status, _ body: ErrorBody) {
        metrics?.recordRefusal(status: status.code)
        logger.notice("refused a realtime connection", metadata: ["status": "\(status.code)", "reason": "\(body.message)"])
    }

    /// The WebSocket upgrade decision for `transport`: ours only for ``path``
    /// with an accepted key. ``RealtimeUpgradeGuard`` has already answered a
    /// refused key with its status.
    func shouldUpgrade(
        _ transport: Transport
    ) -> @Sendable (HTTPRequest, any Channel, Logger) async throws -> ShouldUpgradeResult<WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>> {
        { request, channel, _ in
            let target = request.path ?? ""
            guard URI(target).path == Self.path else { return .dontUpgrade }
            let framing: PhoenixFraming, caller: RealtimeCaller
            switch self.admit(uri: target, apiKeyHeader: request.headerFields[Self.apiKeyField], transport: transport) {
            case .accepted(let accepted, let identified):
                (framing, caller) = (accepted, identified)
            case .socketPeer(let accepted):
                guard case .unixSocket(let peer) = transport else { return .dontUpgrade }
                (framing, caller) = (accepted, await peer(channel))
            case .refused:
                return .dontUpgrade
            }
            let budget = SocketBudget(
                maximumBytes: self.configuration.maximumQueuedBytes, messageBytes: self.configuration.maximumMessageSize, tally: self.heldBytes
            )
            // Every frame passes the guard, from the first one after the 101 on.
            let (logger, maximumMessageSize) = (self.logger, self.configuration.maximumMessageSize)
            try await channel.eventLoop.submit {
                try channel.pipeline.syncOperations.addHandler(ClientFrameGuard.Installer(logger: logger, budget: budget, maximumMessageSize: maximumMessageSize))
                try channel.pipeline.syncOperations.addHandler(WritabilityWaiters(), position: .first)
            }.get()
            // Its connection was counted against the caller's limit by the guard in front (``childChannel``).
            return .upgrade([:]) { inbound, outbound, _ in
                let connection = RealtimeConnection(
                    endpoint: self, framing: framing, caller: caller, outbound: outbound, socket: channel, budget: budget
                )
                await connection.run(inbound)
            }
        }
    }

    static let apiKeyField = HTTPField.Name("x-api-key")!

    /// `GET /realtime/v1/websocket` without an upgrade: the refusal's status
    /// (401 for a missing or wrong key), or 426 Upgrade Required.
    package func addRoutes(to router: Router<SocketRequestContext>, transport: Transport) {
        addBroadcastRoutes(to: router, transport: transport)
        router.get(RouterPath(stringLiteral: String(Self.path.dropFirst()))) { request, _ in
            switch self.admit(uri: request.uri.description, apiKeyHeader: request.headers[Self.apiKeyField], transport: transport) {
            case .refused(let status, let body):
                self.refuse(status, body)
                return Response.json(status, body)
            case .accepted, .socketPeer:
                return Response.json(.upgradeRequired, ErrorBody(code: "websocket_required", message: "\(Self.path) speaks WebSocket (Supabase Realtime)"))
            }
        }
    }

    /// The server for `transport`: HTTP/1.1 with the WebSocket upgrade, the
    /// socket's limits for up to `connections`, and the guard that answers
    /// a bad first request or a refused upgrade with its status.
    func server(connections: SocketLimitsHandler.Counter, idleTimeout: Duration, transport: Transport) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in
            self.childChannel(responder: responder, connections: connections, idleTimeout: idleTimeout, transport: transport)
        }
    }

    /// One connection of ``server(connections:idleTimeout:transport:)``;
    /// `connections` nil where they are counted before the guard, and
    /// `additionalChannelHandlers` behind the socket's limits for requests
    /// that are not upgraded.
    package func childChannel(
        responder: @escaping HTTPChannelHandler.Responder, connections: SocketLimitsHandler.Counter?, idleTimeout: Duration, transport: Transport,
        additionalChannelHandlers: @autoclosure @escaping @Sendable () -> [any RemovableChannelHandler] = []
    ) -> RealtimeUpgradeGuard.Channel {
        let timeout = TimeAmount.nanoseconds(Int64(idleTimeout / .nanoseconds(1)))
        let http1 = HTTP1Channel.Configuration(
            additionalChannelHandlers: [SocketLimitsHandler(bodyTimeout: timeout)] + additionalChannelHandlers(), idleTimeout: timeout
        )
        let configuration = HTTP1WebSocketUpgradeChannel.Configuration(http1: http1, ws: webSocketConfiguration)
        let upgrade = HTTP1WebSocketUpgradeChannel(responder: responder, configuration: configuration, shouldUpgrade: shouldUpgrade(transport))
        return RealtimeUpgradeGuard.Channel(inner: upgrade, connections: connections, firstRequestTimeout: timeout) { head, channel in
            guard URI(head.uri).path == Self.path, head.headers.contains(name: "upgrade") else { return nil }
            switch self.admit(uri: head.uri, apiKeyHeader: head.headers.first(name: "x-api-key"), transport: transport) {
            case .refused(let status, let body):
                self.refuse(status, body)
                return (status, body)
            case .accepted(_, let caller):
                // Counted here, once per connection and before the upgrade, so that connections
                // arriving together past the caller's limit each hear 429 and why.
                guard let consumer = caller.consumer else { return nil }
                do throws(ConsumerLedger.Refusal) {
                    try self.consumers.withLock { ledger throws(ConsumerLedger.Refusal) in try ledger.openConnection(consumer) }
                } catch {
                    let body = ErrorBody(code: error.code, message: error.description)
                    self.refuse(.tooManyRequests, body)
                    return (.tooManyRequests, body)
                }
                channel.closeFuture.whenComplete { _ in self.consumers.withLock { $0.closeConnection(consumer) } }
                return nil
            case .socketPeer:
                return nil
            }
        }
    }

    /// Takes a channel slot for `channel` within ``RealtimeConfiguration/maximumChannels`` and its
    /// caller's limit; otherwise returns why not, naming the limit.
    func reserveChannel(for channel: RealtimeChannel) -> String? {
        let admitted = openChannels.withLock { channels in
            guard channels.count < configuration.maximumChannels else { return false }
            channels[ObjectIdentifier(channel)] = channel
            return true
        }
        guard admitted else { return "pgherald serves at most \(configuration.maximumChannels) channels (realtime.max_channels)" }
        guard let consumer = channel.caller.consumer else { return nil }
        do {
            try consumers.withLock { ledger throws(ConsumerLedger.Refusal) in
                try ledger.openChannel(consumer, conditions: channel.join.conditions)
                channel.state.withLock { $0.counted = consumer }
            }
            return nil
        } catch {
            _ = openChannels.withLock { $0.removeValue(forKey: ObjectIdentifier(channel)) }
            return error.description
        }
    }

    /// Counts `channel` against `consumer` rather than the consumer it was counted against, for a
    /// pushed token of another identity; or says which limit refuses it, and nothing changes.
    func recountChannel(_ channel: RealtimeChannel, as consumer: RealtimeConsumer?) -> String? {
        let conditions = channel.join.conditions
        do {
            try consumers.withLock { ledger throws(ConsumerLedger.Refusal) in
                let (counted, released) = channel.state.withLock { ($0.counted, $0.released) }
                guard !released, counted != consumer else { return }
                if let consumer { try ledger.openChannel(consumer, conditions: conditions) }
                if let counted { ledger.closeChannel(counted, conditions: conditions) }
                channel.state.withLock { $0.counted = consumer }
            }
            return nil
        } catch {
            return error.description
        }
    }

    /// Releases what ``reserveChannel(for:)`` counted, against whichever consumer it is counted now.
    func releaseChannel(of channel: RealtimeChannel) {
        _ = openChannels.withLock { $0.removeValue(forKey: ObjectIdentifier(channel)) }
        consumers.withLock { ledger in
            let counted = channel.state.withLock { state in
                defer { (state.counted, state.released) = (nil, true) }
                return state.counted
            }
            if let counted { ledger.closeChannel(counted, conditions: channel.join.conditions) }
        }
    }

    /// Applies new access rules to the channels of Unix-socket peers, which
    /// were admitted by who they are: each channel's bindings are narrowed to
    /// the peer's new grant, and a channel that a binding of falls outside it
    /// is ended with a `system` error and `phx_close`. Returns how many ended.
    package func apply(access grant: (PeerCredentials) -> (scope: AccessScope, identity: PeerIdentity?)) -> Int {
        var ended = 0
        for channel in openChannels.withLock({ Array($0.values) }) {
            var caller = channel.caller
            guard let peer = caller.peer else { continue }
            let (scope, identity) = grant(peer)
            caller.scope = scope
            do {
                try channel.regrant(caller)
            } catch {
                channel.revoke("Unauthorized: the access grant of \(identity.map(String.init(describing:)) ?? caller.name) changed: \(error.message)")
                ended += 1
            }
        }
        return ended
    }
}

/// Who is on the other end of a realtime socket or channel, and what it may see.
package struct RealtimeCaller: Sendable {
    var name: String
    var scope: AccessScope
    /// A token's expiry, in seconds since 1970.
    var expiresAt: Double?
    /// The socket's `apikey`, so a join repeating it as `access_token` is not checked twice.
    var presentedKey: String?
    /// The Unix-socket peer admitted by who it is (no realtime keys): its
    /// grant comes from the access rules and follows their reloads.
    var peer: PeerCredentials?
    /// Whom its connections and channels are counted against; nil for a Unix-socket peer.
    var consumer: RealtimeConsumer?

    package init(name: String, scope: AccessScope, expiresAt: Double?, presentedKey: String?, peer: PeerCredentials? = nil, consumer: RealtimeConsumer? = nil) {
        self.name = name
        self.scope = scope
        self.expiresAt = expiresAt
        self.presentedKey = presentedKey
        self.peer = peer
        self.consumer = consumer
    }

    init(_ identity: RealtimeIdentity, presentedKey: String?) {
        self.init(name: identity.name, scope: identity.scope, expiresAt: identity.expiresAt, presentedKey: presentedKey, consumer: identity.consumer)
    }
}
