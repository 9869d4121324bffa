import NIOCore

/// Reads the start of a connection's first request, before any HTTP handler
/// exists, to choose the pipeline that serves it (see ``SocketChildChannel``).
///
/// It holds what it has read until the chosen handlers are in place behind
/// it, passes it on, and takes itself out of the pipeline. A connection that
/// has not shown enough to choose within the timeout is closed.
final class RequestLineSniffer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// What a connection's first bytes ask for.
    enum Route: Equatable {
        /// `GET /events`, served by ``EventStreamHandler`` on the event loop.
        case eventStream
        /// Anything else, served by Hummingbird.
        case other
    }

    /// Puts the route's handlers in the pipeline behind the sniffer; a
    /// failed future drops the bytes and closes the connection. Called once,
    /// with nil if the connection ends before a route is chosen.
    typealias Setup = (Route?) -> EventLoopFuture<Void>

    private static let streamPrefix = Array("GET /events".utf8)

    private let setup: Setup
    private let timeout: TimeAmount
    private var deadline: Scheduled<Void>?
    private var buffered: ByteBuffer?
    private var chosen = false

    init(timeout: TimeAmount, setup: @escaping Setup) {
        self.timeout = timeout
        self.setup = setup
    }

    /// The route for a connection whose first bytes are `bytes`, or nil until enough have come.
    static func route(of bytes: ByteBufferView) -> Route? {
        let prefix = streamPrefix
        for (index, byte) in bytes.enumerated() {
            if index < prefix.count {
                guard byte == prefix[index] else { return .other }
            } else {
                return byte == UInt8(ascii: " ") || byte == UInt8(ascii: "?") ? .eventStream : .other
            }
        }
        return nil
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        endUnchosen()
    }

    func channelInactive(context: ChannelHandlerContext) {
        endUnchosen()
        context.fireChannelInactive()
    }

    private func endUnchosen() {
        guard !chosen else { return }
        chosen = true
        _ = setup(nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if buffered == nil {
            buffered = bytes
        } else {
            buffered!.writeBuffer(&bytes)
        }
        guard !chosen, let route = Self.route(of: buffered!.readableBytesView) else { return }
        chosen = true
        deadline?.cancel()
        let sync = context.pipeline.syncOperations
        setup(route).assumeIsolated().whenComplete { [self] result in
            guard case .success = result else {
                self.buffered = nil
                return context.close(promise: nil)
            }
            if let buffered {
                self.buffered = nil
                context.fireChannelRead(wrapInboundOut(buffered))
                context.fireChannelReadComplete()
            }
            sync.removeHandler(context: context, promise: nil)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // Held until the route's handlers exist; they get it with the bytes.
    }
}
