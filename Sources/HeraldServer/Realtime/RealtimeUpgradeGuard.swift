import HTTPTypes
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOHTTP1

/// Answers a refused realtime upgrade (a missing or wrong key) with its own
/// status, 401, as Supabase's server does. Hummingbird answers every refused
/// upgrade with a bare 400, so this handler sits between the request decoder
/// and the upgrade handler and answers before the upgrade is tried.
///
/// It looks at the connection's first request only, then takes itself out
/// of the pipeline: after an upgrade the channel carries WebSocket frames.
final class RealtimeUpgradeGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// The refusal for a request head, or nil to let it through.
    typealias Check = @Sendable (HTTPRequestHead) -> (HTTPResponse.Status, ErrorBody)?

    private let check: Check
    private var refused = false

    init(check: @escaping Check) {
        self.check = check
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        guard case .head(let head) = unwrapInboundIn(data), let (status, body) = check(head) else {
            context.fireChannelRead(data)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        refused = true
        let buffer = Response.jsonBuffer(body)
        let headers = HTTPHeaders([
            ("content-type", "application/json"), ("content-length", String(buffer.readableBytes)), ("connection", "close"),
        ])
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .init(statusCode: status.code), headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in context.close(promise: nil) }
    }

    /// Hummingbird's WebSocket upgrade channel with the guard in front of its upgrade handler.
    struct Channel: ServerChildChannel {
        let inner: HTTP1WebSocketUpgradeChannel
        let check: Check

        func setup(channel: any NIOCore.Channel, logger: Logger) -> EventLoopFuture<HTTP1WebSocketUpgradeChannel.Value> {
            inner.setup(channel: channel, logger: logger).flatMapThrowing { value in
                let decoder = try channel.pipeline.syncOperations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
                try channel.pipeline.syncOperations.addHandler(RealtimeUpgradeGuard(check: check), position: .after(decoder))
                return value
            }
        }

        func handle(value: HTTP1WebSocketUpgradeChannel.Value, logger: Logger) async {
            await inner.handle(value: value, logger: logger)
        }
    }
}
