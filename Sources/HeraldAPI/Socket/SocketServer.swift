import Foundation
public import Herald
import HeraldHTTP
public import HeraldOutput
public import HeraldPostgres
public import HeraldSupabase
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
public import Logging
import NIOCore
public import ServiceLifecycle
import Synchronization

/// Serves event streams, statistics and health over HTTP/1.1 on a Unix
/// socket, and with `http.listen` over HTTPS and HTTP/2 to other machines.
///
/// - `GET /events`: SSE (default) or NDJSON (`Accept: application/x-ndjson` or
///   `?format=ndjson`), filtered by `table`, `op` and `where` (see ``FilterQuery``).
/// - `GET /stats`: ``DaemonStatistics`` as JSON.
/// - `GET /healthz`: 200 while listening, 503 with a reason otherwise.
/// - `GET /metrics`: Prometheus text (``DaemonMetrics``).
/// - `GET /console`: the live console, with `console:` (see ``ConsoleConfiguration``),
///   also on TCP with `console.listen`, where only the console is served.
///
/// With an ``AccessPolicy``, each connection's peer (`SO_PEERCRED`) gets only
/// what its grant covers: `/events` outside it is refused with 403, a wider
/// filter is narrowed, and `/stats` and `/metrics` leave out other tables.
///
/// `curl -N --unix-socket PATH 'http://localhost/events?table=course'` works.
public final class SocketServer: Service, Sendable {
    public let configuration: SocketConfiguration
    let broker: Broker
    /// The event source's state, for /healthz, /stats and what the journal allows.
    let health: SourceHealth
    let catalog: SchemaCatalog
    let journal: JournalReader
    let maintenance: JournalMaintenance?
    let metrics: DaemonMetrics?
    /// Every output, for `/stats`.
    let outputs: OutputDirectory
    /// Supabase Realtime at `/realtime/v1/websocket`; nil: not served.
    let realtime: RealtimeEndpoint?
    /// Streams of peers under `rls: true` read their cohort's broker; nil: such peers are refused.
    let rowSecurity: RowSecurityGate?
    let logger: Logger
    let version: String
    let started = ContinuousClock.now
    /// The streams open, in all and by key, user and address.
    let streams: Mutex<StreamLedger>
    /// Events written to streams since start, for `/stats`; relaxed, as no decision depends on it.
    let eventsWritten = Atomic<UInt64>(0)
    /// The `access:` section in force; nil: whoever may connect sees everything.
    let access: Mutex<AccessPolicy?>
    /// Open streams, for a reload of the access rules and for shutdown.
    let trackedStreams = Mutex(TrackedStreams())
    /// The sets of live-query parameters each caller follows, within each query's limits.
    let parameterSets = Mutex(ParameterSetLedger())
    /// One ``WriteTicker`` per event loop; the loops live as long as the server.
    let writeTickers = Mutex<[ObjectIdentifier: WriteTicker]>([:])
    private let serving = OneShotFlag()
    /// The network listener's browser origins; nil without `http.cors.origins`.
    let cors: CORSPolicy?
    /// The network listener's certificate, read when it starts and on reload.
    let certificates = Mutex<CertificateStore?>(nil)
    /// What the consoles were last shown of the dead letters, and when it was read.
    let recentDeadLetters = Mutex<(at: ContinuousClock.Instant, letters: [DeadLetterSummary])?>(nil)

    public init(
        configuration: SocketConfiguration,
        broker: Broker,
        health: SourceHealth,
        catalog: SchemaCatalog,
        journal: JournalReader,
        maintenance: JournalMaintenance? = nil,
        metrics: DaemonMetrics? = nil,
        outputs: OutputDirectory = OutputDirectory(),
        realtime: RealtimeEndpoint? = nil,
        rowSecurity: RowSecurityGate? = nil,
        access: AccessPolicy? = nil,
        version: String,
        logger: Logger
    ) {
        self.access = Mutex(access)
        cors = configuration.network.flatMap { $0.corsOrigins.isEmpty ? nil : CORSPolicy(origins: $0.corsOrigins) }
        self.journal = journal
        self.maintenance = maintenance
        self.metrics = metrics
        self.outputs = outputs
        self.realtime = realtime
        self.rowSecurity = rowSecurity
        self.configuration = configuration
        self.streams = Mutex(StreamLedger(maximum: configuration.maximumSubscribers, limits: configuration.streamShares))
        self.broker = broker
        self.health = health
        self.catalog = catalog
        self.version = version
        self.logger = logger
        realtime?.onCredentialsChange { [weak self] credentials in self?.revokeStreams(under: credentials) }
    }

    /// Ready once the socket accepts connections with its permissions set;
    /// false if the server ended first.
    public func waitUntilReady() async -> Bool {
        await serving.wait()
    }

    public var isReady: Bool { serving.answer == true }

    public func run() async throws {
        defer { serving.set(false) }
        // Bind once the database has answered: a start that cannot connect then
        // never touches the socket, and its one error line is the connection's.
        guard await health.waitUntilConnected() else {
            // The listener's failure ends the group; finishing first would start a shutdown that hides it.
            try? await gracefulShutdown()
            return
        }
        let path = configuration.path
        if let group = configuration.group { _ = try SocketFile.groupID(group) }
        if try SocketFile.prepare(path) {
            logger.notice("replaced a stale socket file left by an earlier daemon", metadata: ["path": "\(path)"])
        }
        let inode = Mutex<ino_t?>(nil)
        defer { inode.withLock { $0 }.map { SocketFile.remove(path, inode: $0) } }
        let (securing, secured) = AsyncStream.makeStream(of: (any Error).self)

        let router = Router(context: SocketRequestContext.self)
        addRoutes(to: router)
        addQueryRoutes(to: router)
        if configuration.console != nil { addConsoleRoutes(to: router, onTCP: false) }
        let connections = SocketLimitsHandler.Counter(limit: configuration.maximumConnections)
        let requestTimeout = TimeAmount.nanoseconds(Int64(configuration.idleTimeout / .nanoseconds(1)))
        let server: HTTPServerBuilder
        if let realtime {
            let transport = RealtimeEndpoint.Transport.unixSocket { [self] channel in await realtimeCaller(on: channel) }
            realtime.addRoutes(to: router, transport: transport)
            server = HTTPServerBuilder { [self] responder in
                let inner = realtime.childChannel(
                    responder: responder, connections: nil, idleTimeout: configuration.idleTimeout, transport: transport,
                    additionalChannelHandlers: [EventStreamHandler(server: self, headTimeout: nil)]
                )
                return SocketChildChannel(inner: inner, server: self, connections: connections, requestTimeout: requestTimeout)
            }
        } else {
            let http1 = HTTP1Channel.Configuration(
                additionalChannelHandlers: [SocketLimitsHandler(), EventStreamHandler(server: self, headTimeout: nil)], idleTimeout: requestTimeout
            )
            server = HTTPServerBuilder { [self] responder in
                SocketChildChannel(
                    inner: HTTP1Channel(responder: responder, configuration: http1), server: self, connections: connections, requestTimeout: requestTimeout
                )
            }
        }
        let application = Application(
            router: router,
            server: server,
            configuration: .init(address: .unixDomainSocket(path: path), serverName: "pgherald"),
            services: [HeartbeatTicker(broker: broker, interval: configuration.heartbeatInterval)],
            onServerRunning: { [configuration, logger, serving] _ in
                do {
                    let created = try SocketFile.applyPermissions(path, mode: configuration.mode, group: configuration.group)
                    inode.withLock { $0 = created }
                    serving.set(true)
                    logger.info("serving", metadata: [
                        "socket": "\(path)", "mode": "\(String(configuration.mode, radix: 8))",
                        "group": "\(configuration.group ?? "(daemon's)")",
                    ])
                } catch {
                    // The socket exists with the wrong permissions: stop rather than serve it.
                    logger.critical("cannot secure the socket; exiting", metadata: ["error": "\(error)"])
                    unlink(path)
                    secured.yield(error)
                }
                secured.finish()
            },
            logger: logger.forHummingbird
        )
        // A socket that cannot be secured ends the server, and the daemon with it, as an
        // error: exit() from the server's own callback would tear down threads still running.
        var listeners: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: application, successTerminationBehavior: .gracefullyShutdownGroup, failureTerminationBehavior: .gracefullyShutdownGroup),
            .init(service: SecuringWatch(failures: securing), successTerminationBehavior: .gracefullyShutdownGroup, failureTerminationBehavior: .gracefullyShutdownGroup),
        ]
        if let address = configuration.console?.listen {
            listeners.append(.init(
                service: ListeningApplication(application: consoleApplication(at: address), key: "console.listen", address: address),
                successTerminationBehavior: .gracefullyShutdownGroup, failureTerminationBehavior: .gracefullyShutdownGroup
            ))
        }
        if let network = configuration.network {
            let store = try network.tls.map { files throws(CertificateStore.Failure) in try CertificateStore(files: files) }
            certificates.withLock { $0 = store }
            for address in network.listen {
                listeners.append(.init(
                    service: ListeningApplication(application: networkApplication(network, at: address, certificates: store), key: "http.listen", address: address),
                    successTerminationBehavior: .gracefullyShutdownGroup, failureTerminationBehavior: .gracefullyShutdownGroup
                ))
            }
        }
        // One listener that cannot bind stops the others gracefully: cancelled, a server
        // that is already serving logs errors of its own ("Waiting on child channel").
        let group = ServiceGroup(configuration: .init(services: listeners, logger: logger))
        // Streams have no task for the server's shutdown to wait for: they are ended here.
        try await withGracefulShutdownHandler {
            try await group.run()
        } onGracefulShutdown: { [self] in
            let (streams, queries) = trackedStreams.withLock { tracked in
                tracked.isShuttingDown = true
                return (Array(tracked.byID.values), Array(tracked.queries.values))
            }
            for stream in streams { stream.end() }
            for query in queries { query.subscription.cancel() }
        }
        await waitForStreamsToEnd(within: .seconds(2))
    }

    /// The console on TCP: its page, state and controls, and `/events` for
    /// its tail, each asking for a key. Nothing else of the socket's API is
    /// reachable there.
    private func consoleApplication(at address: ListenAddress) -> some ApplicationProtocol {
        let router = Router(context: SocketRequestContext.self)
        addConsoleRoutes(to: router, onTCP: true)
        // The console holds a few connections per viewer; this bounds what a flood of them can take.
        let connections = SocketLimitsHandler.Counter(limit: 256)
        let requestTimeout = TimeAmount.nanoseconds(Int64(configuration.idleTimeout / .nanoseconds(1)))
        let http1 = HTTP1Channel.Configuration(
            additionalChannelHandlers: [SocketLimitsHandler(), EventStreamHandler(server: self, headTimeout: nil)], idleTimeout: requestTimeout
        )
        let server = HTTPServerBuilder { [self] responder in
            SocketChildChannel(
                inner: HTTP1Channel(responder: responder, configuration: http1), server: self, connections: connections, requestTimeout: requestTimeout
            )
        }
        return Application(
            router: router,
            server: server,
            configuration: .init(address: .hostname(address.host, port: address.port), serverName: "pgherald"),
            onServerRunning: { [logger] _ in
                logger.info("console listening", metadata: ["address": "http://\(address)/console"])
            },
            logger: logger.forHummingbird
        )
    }

    /// Waits until every stream has written its end and closed, or `limit` has passed.
    private func waitForStreamsToEnd(within limit: Duration) async {
        let deadline = ContinuousClock.now + limit
        while streams.withLock({ $0.total }) > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// The write ticker of `eventLoop`, shared by the streams on it.
    func writeTicker(for eventLoop: any EventLoop) -> WriteTicker {
        writeTickers.withLock { tickers in
            if let ticker = tickers[ObjectIdentifier(eventLoop)] { return ticker }
            let ticker = WriteTicker(eventLoop: eventLoop, logger: logger)
            tickers[ObjectIdentifier(eventLoop)] = ticker
            return ticker
        }
    }

    /// Takes a stream slot for a stream whose own conditions cost `conditions`, or says which limit refuses it.
    func reserveStream(for viewer: Viewer, on channel: any Channel, conditions: Int = 0) -> Result<StreamSlot, StreamLedger.Refusal> {
        let holders = streamHolders(of: viewer, on: channel)
        do {
            try streams.withLock { ledger throws(StreamLedger.Refusal) in try ledger.open(holders, conditions: conditions) }
        } catch {
            return .failure(error)
        }
        return .success(StreamSlot(server: self, holders: holders, conditions: conditions))
    }

    /// Who a stream counts against: over the network, the key or user that
    /// opened it and its peer's address (unless a proxy's); nobody on the
    /// Unix socket, nor the console key.
    private func streamHolders(of viewer: Viewer, on channel: any Channel) -> [StreamLedger.Holder] {
        guard Self.isNetworkListener(channel) else { return [] }
        var holders = viewer.consumer.map { [StreamLedger.Holder.credential($0)] } ?? []
        if let address = channel.remoteAddress?.ipAddress, !(configuration.network?.addressLimit.proxies.contains(address) ?? false) {
            holders.append(.address(address))
        }
        return holders
    }

    /// One open stream; returns its slot, and forgets the stream, when released.
    final class StreamSlot: Sendable {
        let server: SocketServer
        let holders: [StreamLedger.Holder]
        let conditions: Int

        init(server: SocketServer, holders: [StreamLedger.Holder], conditions: Int) {
            self.server = server
            self.holders = holders
            self.conditions = conditions
        }

        /// Whose turn the stream's replay from the journal takes: its user's,
        /// else its address's, else its key's. A local peer may be a proxy
        /// for many clients, so each of its streams takes turns alone.
        var replayHolder: String {
            let user = holders.first { if case .credential(let consumer) = $0 { consumer.isUser } else { false } }
            let address = holders.first { if case .address = $0 { true } else { false } }
            return (user ?? address ?? holders.first)?.description ?? "local stream \(ObjectIdentifier(self).hashValue)"
        }

        /// Keeps `stream` where a reload of the access rules and shutdown
        /// find it, for as long as the slot lives; a stream that opened
        /// while shutdown ended the others is ended at once.
        func track(_ stream: OpenStream) {
            let tracked = server.trackedStreams.withLock { tracked in
                guard !tracked.isShuttingDown else { return false }
                tracked.byID[ObjectIdentifier(self)] = stream
                return true
            }
            if !tracked { stream.end() }
        }

        /// The same for a live query's stream.
        func track(_ stream: QueryStream) {
            let tracked = server.trackedStreams.withLock { tracked in
                guard !tracked.isShuttingDown else { return false }
                tracked.queries[ObjectIdentifier(self)] = stream
                return true
            }
            if !tracked { stream.subscription.cancel() }
        }

        deinit {
            server.trackedStreams.withLock { tracked in
                tracked.byID[ObjectIdentifier(self)] = nil
                tracked.queries[ObjectIdentifier(self)] = nil
            }
            server.streams.withLock { $0.close(holders, conditions: conditions) }
        }
    }

    /// The open streams by their slot, and whether shutdown has ended them.
    struct TrackedStreams {
        var byID: [ObjectIdentifier: OpenStream] = [:]
        var queries: [ObjectIdentifier: QueryStream] = [:]
        var isShuttingDown = false
    }
}

/// Throws the error the socket's `onServerRunning` could not throw (a
/// socket it cannot secure); otherwise returns at the graceful stop, which
/// may come before the socket is secured (another listener cannot bind).
private struct SecuringWatch: Service {
    let failures: AsyncStream<any Error>

    func run() async throws {
        try await cancelWhenGracefulShutdown {
            for await error in failures { throw error }
            // Secured. A service that ends while its group stops for another reason makes the group cancel the servers.
            try? await gracefulShutdown()
        }
    }
}

/// Asks idle streams for a heartbeat at a fixed interval.
struct HeartbeatTicker: Service {
    let broker: Broker
    let interval: Duration

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await Task.sleep(for: interval)
                } catch {
                    return
                }
                broker.requestHeartbeat()
            }
        }
    }
}
