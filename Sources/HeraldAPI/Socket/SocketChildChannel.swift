import HeraldHTTP
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// The socket's connections: `GET /events` streams are served by an
/// ``EventStreamHandler`` on the event loop, everything else by
/// Hummingbird's `Inner` child channel.
///
/// Hummingbird serves each connection from a task that stays parked inside
/// the response for as long as a stream lasts, and a task keeps the deepest
/// stack it ever reached: that was about two thirds of an idle stream's
/// memory. A stream here has no task once it is open.
///
/// Every connection is counted from its accept; past the limit, its first
/// request is answered 503 (see ``SocketLimitsHandler``).
struct SocketChildChannel<Inner: ServerChildChannel>: ServerChildChannel {
    struct Value: ServerChildChannelValue {
        let channel: any Channel
        /// The inner channel's value, once the first request turned out not
        /// to be a stream; nil for a stream or an answered connection.
        let inner: EventLoopFuture<Inner.Value?>
    }

    /// Reads start at 512 bytes rather than NIO's 2,048 and grow with what comes.
    static var receiveAllocator: AdaptiveRecvByteBufferAllocator {
        AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65_536)
    }

    let inner: Inner
    let server: SocketServer
    let connections: SocketLimitsHandler.Counter
    /// How long a connection may take to send its first request head.
    let requestTimeout: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        // Counted for the connection's whole life, whatever it turns into.
        let admitted = connections.admit() == nil
        channel.closeFuture.whenComplete { [connections] _ in connections.release() }
        // The channel keeps its last receive buffer for the next read, which
        // for a stream may never come: requests here are small, so start small.
        _ = try? channel.syncOptions?.setOption(ChannelOptions.recvAllocator, value: Self.receiveAllocator)
        let decided = channel.eventLoop.makePromise(of: Inner.Value?.self)
        let sniffer = RequestLineSniffer(timeout: requestTimeout) { route in
            guard let route else {
                decided.succeed(nil)
                return channel.eventLoop.makeSucceededVoidFuture()
            }
            guard admitted else {
                decided.succeed(nil)
                return refuseConnection(channel)
            }
            switch route {
            case .eventStream:
                decided.succeed(nil)
                return channel.eventLoop.makeCompletedFuture { try addEventStreamHandlers(to: channel) }
            case .other:
                let setUp = inner.setup(channel: channel, logger: logger)
                setUp.map(Optional.some).cascade(to: decided)
                return setUp.map { _ in }
            }
        }
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(sniffer)
            return Value(channel: channel, inner: decided.futureResult)
        }
    }

    func handle(value: Value, logger: Logger) async {
        guard let inner = try? await value.inner.get() else { return }
        await self.inner.handle(value: inner, logger: logger)
    }

    /// The pipeline of a stream: the HTTP/1.1 codec (answering requests it
    /// cannot parse with 400), the socket's limits, the stream.
    private func addEventStreamHandlers(to channel: any Channel) throws {
        let sync = channel.pipeline.syncOperations
        try sync.configureHTTPServerPipeline(withPipeliningAssistance: false, withErrorHandling: true)
        try sync.addHandler(HTTP1ToHTTPServerCodec(secure: false))
        try sync.addHandler(SocketLimitsHandler())
        try sync.addHandler(EventStreamHandler(server: server, headTimeout: requestTimeout))
    }

    /// Answers a connection past the limit with 503; the future fails once
    /// the answer is written, so that the connection is closed.
    private func refuseConnection(_ channel: any Channel) -> EventLoopFuture<Void> {
        let refusal = SocketLimitsHandler.tooManyConnections(limit: connections.limit)
        let body = Response.jsonBuffer(ErrorBody(code: refusal.code, message: refusal.message))
        var bytes = channel.allocator.buffer(capacity: body.readableBytes + 128)
        bytes.writeString(
            "HTTP/1.1 \(refusal.status.code) \(refusal.status.reasonPhrase)\r\ncontent-type: application/json\r\n"
                + "content-length: \(body.readableBytes)\r\nconnection: close\r\n\r\n"
        )
        bytes.writeImmutableBuffer(body)
        return channel.writeAndFlush(bytes).flatMapThrowing { throw ChannelError.outputClosed }
    }
}
