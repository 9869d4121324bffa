import HTTPTypes
import NIOCore
import NIOHTTPTypes
import Synchronization

/// Counts the socket's open connections; one opened beyond the limit is
/// answered `503` at its first request and closed, so that thousands of idle
/// connections cannot take every descriptor (the idle timeout closes those
/// that never send a request).
final class ConnectionLimitHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The count of open connections, shared by every connection's handler.
    final class Counter: Sendable {
        let limit: Int
        private let open = Atomic(0)

        init(limit: Int) {
            self.limit = limit
        }

        var count: Int { open.load(ordering: .relaxed) }

        /// Counts a connection; whether it is within the limit.
        func admit() -> Bool {
            open.add(1, ordering: .relaxed).newValue <= limit
        }

        func release() {
            open.subtract(1, ordering: .relaxed)
        }
    }

    private let counter: Counter
    private var counted = false
    private var admitted = true

    init(counter: Counter) {
        self.counter = counter
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { count() }
    }

    func channelActive(context: ChannelHandlerContext) {
        count()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        uncount()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        uncount()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !admitted else { return context.fireChannelRead(data) }
        guard case .head = unwrapInboundIn(data) else { return }
        var body = context.channel.allocator.buffer(capacity: 128)
        body.writeString(#"{"error":"too_many_connections","message":"the socket serves at most \#(counter.limit) connections"}"# + "\n")
        let head = HTTPResponse(status: .serviceUnavailable, headerFields: [
            .contentType: "application/json", .contentLength: String(body.readableBytes), .connection: "close",
        ])
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }

    private func count() {
        guard !counted else { return }
        counted = true
        admitted = counter.admit()
    }

    private func uncount() {
        guard counted else { return }
        counted = false
        counter.release()
    }
}
