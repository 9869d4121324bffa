import HTTPTypes
import HeraldHTTP
import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import NIOCore

extension SocketServer {
    /// The network listener at `address` (`http.listen`): `/events`,
    /// `/queries/NAME`, `/healthz`, the Supabase endpoint and the console,
    /// whichever are on, each asking for a key or token. `/stats` and
    /// `/metrics` answer only the operator's key.
    func networkApplication(
        _ network: NetworkConfiguration, at address: ListenAddress, certificates: CertificateStore?
    ) -> some ApplicationProtocol {
        let router = Router(context: SocketRequestContext.self)
        if let cors { router.add(middleware: CORSMiddleware(policy: cors)) }
        addRoutes(to: router)
        addQueryRoutes(to: router)
        if configuration.console != nil { addConsoleRoutes(to: router, onTCP: true) }
        if let realtime { realtime.addRoutes(to: router, transport: .tcp) }
        let connections = network.addressLimit.counter(limit: network.maximumConnections, key: "http")
        let requestTimeout = TimeAmount(network.timeouts.request)
        // No idle timeout of Hummingbird's: an HTTP2IdleDeadline on each connection closes it.
        let http2 = HTTP2ChannelConfiguration(
            streamConfiguration: .init(
                additionalChannelHandlers: [
                    HTTP2HeadTrimmer(), HTTP2IdleDeadline.Stream(), SocketLimitsHandler(bodyTimeout: TimeAmount(network.timeouts.request)), EventStreamHandler(server: self, headTimeout: nil),
                ],
                idleTimeout: requestTimeout
            )
        )
        let server: HTTPServerBuilder
        if let realtime {
            server = HTTPServerBuilder { [self] responder in
                NetworkChildChannel(
                    certificates: certificates,
                    http1: realtime.childChannel(
                        responder: responder, connections: nil, idleTimeout: network.timeouts.request, transport: .tcp,
                        additionalChannelHandlers: [EventStreamHandler(server: self, headTimeout: nil)]
                    ),
                    http2: HTTP2Channel(responder: responder, configuration: http2), connections: connections, timeouts: network.timeouts,
                    logger: logger
                )
            }
        } else {
            let http1 = HTTP1Channel.Configuration(
                additionalChannelHandlers: [SocketLimitsHandler(bodyTimeout: TimeAmount(network.timeouts.request)), EventStreamHandler(server: self, headTimeout: nil)], idleTimeout: requestTimeout
            )
            server = HTTPServerBuilder { [self] responder in
                NetworkChildChannel(
                    certificates: certificates, http1: HTTP1Channel(responder: responder, configuration: http1),
                    http2: HTTP2Channel(responder: responder, configuration: http2), connections: connections, timeouts: network.timeouts,
                    logger: logger
                )
            }
        }
        return Application(
            router: router,
            server: server,
            configuration: .init(address: .hostname(address.host, port: address.port), serverName: "pgherald"),
            onServerRunning: { [logger] channel in
                let port = channel.localAddress?.port ?? address.port
                logger.info("serving over the network", metadata: [
                    "address": "\(network.scheme)://\(address.host.contains(":") ? "[\(address.host)]" : address.host):\(port)",
                    "http2": "\(certificates != nil)", "cors_origins": "\(network.corsOrigins.count)",
                ])
                if certificates == nil, !NetworkConfiguration.isLoopback(address) {
                    logger.warning("serving plain HTTP off loopback (http.plaintext): tokens and rows cross the network unencrypted", metadata: [
                        "address": "\(address)",
                    ])
                }
            },
            logger: logger.forHummingbird
        )
    }

    /// The CORS headers for the answer to `head`: only over the network, for a listed origin.
    func corsHeaders(for head: HTTPRequest, channel: any Channel) -> HTTPFields {
        guard let cors, Self.isNetworkListener(channel) else { return HTTPFields() }
        return cors.headers(forOrigin: head.headerFields[.origin])
    }

    /// Reads `tls.cert_file` and `tls.key_file` again for new connections
    /// (SIGHUP); a pair that cannot be used leaves the running one.
    func reloadCertificates() {
        guard let certificates = certificates.withLock({ $0 }) else { return }
        do {
            try certificates.reload()
            logger.notice("reloaded the TLS certificate; new connections get it, open ones keep theirs", metadata: [
                "cert_file": "\(certificates.files.certificatePath)",
            ])
        } catch {
            logger.error("cannot reload the TLS certificate; the running one stays in force", metadata: ["reason": "\(error.description)"])
        }
    }
}
