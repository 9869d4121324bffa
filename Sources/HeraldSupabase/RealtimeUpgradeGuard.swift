package import HeraldHTTP
package import HTTPTypes
import HummingbirdCore
package import HummingbirdWebSocket
package import Logging
package import NIOCore
package import NIOHTTP1

/// Stands in front of the WebSocket upgrade handler on each connection's
/// first request, which Hummingbird's upgrade pipeline leaves unguarded:
/// - it answers the socket's limits (`414`, `431`) as ``SocketLimitsHandler``
///   does, and, where it counts the connections, `503` past their limit;
/// - it answers a request the HTTP parser rejects with `400`, and closes a
///   connection whose first request head has not arrived within the idle
///   timeout (a silent or slowloris client), where the upgrade pipeline
///   would leave both hanging;
/// - it answers a refused realtime upgrade (a missing or wrong key) with its
///   own status, 401, as Supabase's server does, where Hummingbird answers
///   every refused upgrade with a bare 400.
///
/// It takes itself out of the pipeline once the first head has passed:
/// after an upgrade the channel carries WebSocket frames, and later
/// requests meet the ``SocketLimitsHandler`` Hummingbird adds.
package final class RealtimeUpgradeGuard: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPServerRequestPart
    package typealias InboundOut = HTTPServerRequestPart
    package typealias OutboundOut = HTTPServerResponsePart

    /// The refusal for a request head, or nil to let it through.
    package typealias Check = @Sendable (HTTPRequestHead, any NIOCore.Channel) -> (HTTPResponse.Status, ErrorBody)?

    private let check: Check
    /// Where connections are counted here: why this one is refused, if it is.
    private let admission: SocketLimitsHandler.Refusal?
    private let firstRequestTimeout: TimeAmount
    /// True once the first request has gone on to the upgrade handler; false
    /// when the guard answered it or the connection ended before it.
    private let passed: EventLoopPromise<Bool>
    private var deadline: Scheduled<Void>?
    private var refused = false

    package init(
        check: @escaping Check, admission: SocketLimitsHandler.Refusal?, firstRequestTimeout: TimeAmount, passed: EventLoopPromise<Bool>
    ) {
        self.check = check
        self.admission = admission
        self.firstRequestTimeout = firstRequestTimeout
        self.passed = passed
    }

    package func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: firstRequestTimeout) { channel.close(promise: nil) }
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        passed.succeed(false)
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        guard case .head(let head) = unwrapInboundIn(data) else { return context.fireChannelRead(data) }
        deadline?.cancel()
        var headerBytes = 0
        for header in head.headers { headerBytes += header.name.utf8.count + header.value.utf8.count }
        let limits = admission
            ?? SocketLimitsHandler.refusal(targetBytes: head.uri.utf8.count, headerBytes: headerBytes, headerFields: head.headers.count)
        if let limits {
            refuse(context, version: head.version, status: limits.status, ErrorBody(code: limits.code, message: limits.message))
        } else if let (status, body) = check(head, context.channel) {
            refuse(context, version: head.version, status: status, body)
        } else {
            passed.succeed(true)
            context.fireChannelRead(wrapInboundOut(.head(Self.withoutOtherUpgrades(head))))
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
    }

    /// `head` without an `Upgrade` that is not the realtime WebSocket's, as
    /// HTTP lets a server ignore it: NIO's upgrade handler, declining one,
    /// passes the request's end on without its head (swift-nio issue 2632),
    /// and the request went unanswered. `curl --http2` over plain HTTP sends
    /// `Upgrade: h2c` with every request.
    package static func withoutOtherUpgrades(_ head: HTTPRequestHead) -> HTTPRequestHead {
        guard head.headers.contains(name: "upgrade") else { return head }
        let isRealtime = URI(head.uri).path == RealtimeEndpoint.path
            && head.headers["upgrade"].contains { $0.lowercased().contains("websocket") }
        guard !isRealtime else { return head }
        var plain = head
        plain.headers.remove(name: "upgrade")
        return plain
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard error is HTTPParserError, !refused else { return context.fireErrorCaught(error) }
        deadline?.cancel()
        refuse(context, version: .http1_1, status: .badRequest, ErrorBody(code: "bad_request", message: "the request is not valid HTTP/1.1"))
    }

    /// Answers with a JSON error and closes the connection.
    private func refuse(_ context: ChannelHandlerContext, version: HTTPVersion, status: HTTPResponse.Status, _ body: ErrorBody) {
        refused = true
        let buffer = Response.jsonBuffer(body)
        let headers = HTTPHeaders([
            ("content-type", "application/json"), ("content-length", String(buffer.readableBytes)), ("connection", "close"),
        ])
        let responseStatus = HTTPResponseStatus(statusCode: status.code, reasonPhrase: status.reasonPhrase)
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: version, status: responseStatus, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }

    /// Hummingbird's WebSocket upgrade channel with the guard in front of its upgrade handler.
    package struct Channel: ServerChildChannel {
        package struct Value: ServerChildChannelValue {
            let upgrade: HTTP1WebSocketUpgradeChannel.Value
            let passed: EventLoopFuture<Bool>
            package var channel: any NIOCore.Channel { upgrade.channel }
        }

        package let inner: HTTP1WebSocketUpgradeChannel
        /// Counts each connection; nil where they are counted before the guard (``SocketChildChannel``).
        package let connections: SocketLimitsHandler.Counter?
        package let firstRequestTimeout: TimeAmount
        package let check: Check

        package func setup(channel: any NIOCore.Channel, logger: Logger) -> EventLoopFuture<Value> {
            // Counted for the connection's whole life, whatever it turns into.
            let peer = channel.remoteAddress
            let admission = connections.flatMap { connections in
                channel.closeFuture.whenComplete { _ in connections.release(from: peer) }
                return connections.admit(from: peer)
            }
            return inner.setup(channel: channel, logger: logger).flatMapThrowing { upgrade in
                let decoder = try channel.pipeline.syncOperations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
                let passed = channel.eventLoop.makePromise(of: Bool.self)
                let guardHandler = RealtimeUpgradeGuard(
                    check: check, admission: admission, firstRequestTimeout: firstRequestTimeout, passed: passed
                )
                try channel.pipeline.syncOperations.addHandler(guardHandler, position: .after(decoder))
                return Value(upgrade: upgrade, passed: passed.futureResult)
            }
        }

        package func handle(value: Value, logger: Logger) async {
            // A connection the guard answered, or that ended before its first
            // request, never gets an upgrade decision; Hummingbird would log
            // each as an error, and a flood of bad requests as a flood of errors.
            guard (try? await value.passed.get()) == true else { return }
            await inner.handle(value: value.upgrade, logger: logger)
        }
    }
}
