import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL

/// The HTTPS connections of one event loop to the daemon's network
/// listener, HTTP/2 by ALPN, each carrying up to ``streamsPerConnection``
/// streams as one browser tab's connection does. Lives on its event loop.
final class HTTP2Connections {
    let eventLoop: any EventLoop
    let host: String
    let port: Int
    let tls: NIOSSLContext
    let streamsPerConnection: Int
    private var current: (multiplexer: EventLoopFuture<NIOHTTP2Handler.StreamMultiplexer>, streams: Int)?

    /// The connection window a browser opens (Chromium's 15 MiB), and each stream's (6 MiB).
    static let connectionWindow = 15 << 20
    static let streamWindow = 6 << 20

    init(eventLoop: any EventLoop, host: String, port: Int, tls: NIOSSLContext, streamsPerConnection: Int) {
        self.eventLoop = eventLoop
        self.host = host
        self.port = port
        self.tls = tls
        self.streamsPerConnection = streamsPerConnection
    }

    /// A TLS context that offers only `protocol` by ALPN (`h2` or `http/1.1`) and trusts the CA in `caFile`.
    static func tlsContext(trusting caFile: String, offering protocol: String = "h2") throws -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.trustRoots = .file(caFile)
        configuration.applicationProtocols = [`protocol`]
        return try NIOSSLContext(configuration: configuration)
    }

    /// Opens a stream on the newest connection with room, or on a new one.
    func openStream(_ initializer: @escaping NIOChannelInitializer) -> EventLoopFuture<any Channel> {
        eventLoop.assertInEventLoop()
        if current == nil || current!.streams >= streamsPerConnection {
            current = (connect(), 0)
        }
        current!.streams += 1
        return current!.multiplexer.flatMap { $0.createStreamChannel(initializer) }
    }

    private func connect() -> EventLoopFuture<NIOHTTP2Handler.StreamMultiplexer> {
        let (tls, host) = (tls, host)
        return ClientBootstrap(group: eventLoop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLClientHandler(context: tls, serverHostname: host))
                    var connection = NIOHTTP2Handler.ConnectionConfiguration()
                    connection.targetWindowSize = Self.connectionWindow
                    connection.initialSettings = [
                        HTTP2Setting(parameter: .maxConcurrentStreams, value: 100),
                        HTTP2Setting(parameter: .initialWindowSize, value: Self.streamWindow),
                    ]
                    var stream = NIOHTTP2Handler.StreamConfiguration()
                    stream.targetWindowSize = Self.streamWindow
                    _ = try sync.configureHTTP2Pipeline(mode: .client, connectionConfiguration: connection, streamConfiguration: stream) { inbound in
                        inbound.close()
                    }
                }
            }
            .connect(host: host, port: port)
            .flatMap { channel in
                do {
                    return try channel.pipeline.syncOperations.handler(type: NIOHTTP2Handler.self).multiplexer
                } catch {
                    return channel.eventLoop.makeFailedFuture(error)
                }
            }
    }
}

@available(*, unavailable)
extension HTTP2Connections: Sendable {}
