package import HummingbirdCore
package import HummingbirdHTTP2
package import Logging
package import NIOCore
package import NIOHTTP2
import NIOSSL
import NIOTLS

/// A connection of the network listener: TLS with the certificate in force
/// when it was accepted, then HTTP/2 or HTTP/1.1 as ALPN chose; plain
/// HTTP/1.1 without TLS.
///
/// Hummingbird's own HTTP/2 channel fixes its TLS context when it is made;
/// here each connection asks the ``CertificateStore``, so that a reload
/// reaches new connections while open ones keep streaming.
///
/// Each step has a deadline (``NetworkConfiguration/Timeouts``): the TLS
/// handshake here, an HTTP/2 connection without streams by an
/// ``HTTP2IdleDeadline``, request heads by Hummingbird's idle timeout.
package struct NetworkChildChannel<HTTP1: ServerChildChannel>: ServerChildChannel {
    package struct Value: ServerChildChannelValue {
        package let channel: any Channel
        /// What the connection turned into; nil when it was refused.
        package let negotiated: EventLoopFuture<NIONegotiatedHTTPVersion<HTTP1.Value, HTTP2Channel.Value>?>
    }

    package let certificates: CertificateStore?
    package let http1: HTTP1
    package let http2: HTTP2Channel
    package let connections: SocketLimitsHandler.Counter
    package let timeouts: NetworkConfiguration.Timeouts
    package let logger: Logger

    package init(
        certificates: CertificateStore?, http1: HTTP1, http2: HTTP2Channel, connections: SocketLimitsHandler.Counter,
        timeouts: NetworkConfiguration.Timeouts, logger: Logger
    ) {
        self.certificates = certificates
        self.http1 = http1
        self.http2 = http2
        self.connections = connections
        self.timeouts = timeouts
        self.logger = logger
    }

    package func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let peer = channel.remoteAddress
        let refusal = connections.admit(from: peer)
        channel.closeFuture.whenComplete { [connections] _ in connections.release(from: peer) }
        if let refusal {
            // Before TLS there is no way to say why: the log says it, once each 10 s however many come.
            if connections.shouldLogRefusal() {
                let perAddress = refusal.status == .tooManyRequests
                self.logger.warning("closed a connection", metadata: [
                    "reason": "\(perAddress ? refusal.message : "http.max_connections reached")",
                    "address": "\(peer?.ipAddress ?? "?")", "limit": "\(perAddress ? connections.perAddress : connections.limit)",
                ])
            }
            channel.close(promise: nil)
            return channel.eventLoop.makeSucceededFuture(Value(channel: channel, negotiated: channel.eventLoop.makeSucceededFuture(nil)))
        }
        guard let certificates else {
            let negotiated = http1.setup(channel: channel, logger: logger).map { Optional(NIONegotiatedHTTPVersion<HTTP1.Value, HTTP2Channel.Value>.http1_1($0)) }
            return channel.eventLoop.makeSucceededFuture(Value(channel: channel, negotiated: negotiated))
        }
        return channel.eventLoop.makeCompletedFuture {
            let sync = channel.pipeline.syncOperations
            try sync.addHandler(NIOSSLServerHandler(context: certificates.context))
            let negotiation = NIOTypedApplicationProtocolNegotiationHandler<NIONegotiatedHTTPVersion<HTTP1.Value, HTTP2Channel.Value>?> { result in
                switch result {
                case .negotiated("h2"):
                    do {
                        try channel.pipeline.syncOperations.addHandler(FlushCoalescer())
                    } catch {
                        return channel.eventLoop.makeFailedFuture(error)
                    }
                    return http2.setup(channel: channel, logger: logger).flatMapThrowing { connection in
                        try channel.pipeline.syncOperations.addHandler(HTTP2IdleDeadline(timeout: TimeAmount(timeouts.idle)))
                        return .http2(connection)
                    }
                case .negotiated("http/1.1"), .fallback:
                    return http1.setup(channel: channel, logger: logger).map { .http1_1($0) }
                case .negotiated:
                    return channel.close().map { nil }
                }
            }
            try sync.addHandler(negotiation)
            // A client that never finishes its hello, or sends it a byte at a time, would hold its connection for good.
            let deadline = channel.eventLoop.scheduleTask(in: TimeAmount(timeouts.handshake)) { [logger = self.logger] in
                logger.debug("closed a connection whose TLS handshake took longer than http.handshake_timeout")
                channel.close(promise: nil)
            }
            negotiation.protocolNegotiationResult.whenComplete { _ in deadline.cancel() }
            return Value(channel: channel, negotiated: negotiation.protocolNegotiationResult)
        }
    }

    package func handle(value: Value, logger: Logger) async {
        do {
            switch try await value.negotiated.get() {
            case .http1_1(let connection)?: await http1.handle(value: connection, logger: logger)
            case .http2(let connection)?: await http2.handle(value: connection, logger: logger)
            case nil: return
            }
        } catch {
            // A failed handshake: a client that does not trust the certificate, or a port scan.
            logger.debug("a network connection ended before its protocol was chosen", metadata: ["error": "\(error)"])
        }
    }
}
