package import NIOCore
import NIOHTTP2

/// Closes an HTTP/2 connection that has had no open stream for `timeout`
/// (`http.idle_timeout`), from its start or its last stream's end, with a
/// GOAWAY naming the last stream it took.
///
/// Hummingbird's own idle timeout only asks the client to leave: a GOAWAY
/// and a PING, and the close waits for the PING's answer, which a client
/// that sends nothing never gives. Frames do not push the deadline back,
/// so neither do PINGs or a header block sent a byte at a time.
///
/// NIO tells stream openings and closings only to its multiplexer, so each
/// stream carries a ``Stream`` handler that counts itself here.
package final class HTTP2IdleDeadline: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = NIOAny

    private let timeout: TimeAmount
    private var openStreams = 0
    private var lastStreamID = HTTP2StreamID.rootStream
    private var deadline: Scheduled<Void>?
    private var context: ChannelHandlerContext?

    package init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    package func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        arm()
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        self.context = nil
    }

    private func streamOpened(_ id: HTTP2StreamID?) {
        openStreams += 1
        if let id, id > lastStreamID { lastStreamID = id }
        deadline?.cancel()
        deadline = nil
    }

    private func streamClosed() {
        openStreams -= 1
        if openStreams == 0 { arm() }
    }

    private func arm() {
        guard let context else { return }
        deadline?.cancel()
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: timeout) { bound.value.expire() }
    }

    private func expire() {
        deadline = nil
        guard let context, openStreams == 0 else { return }
        let goAway = HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: lastStreamID, errorCode: .noError, opaqueData: nil))
        context.writeAndFlush(NIOAny(goAway), promise: nil)
        // The FlushCoalescer below sends the frame at the end of this turn; the close comes after it.
        let channel = context.channel
        context.eventLoop.execute { channel.close(promise: nil) }
    }

    /// Counts its stream on the connection's ``HTTP2IdleDeadline``, from
    /// the stream's first handler to its close.
    package final class Stream: ChannelInboundHandler, RemovableChannelHandler {
        package typealias InboundIn = NIOAny

        private var connection: HTTP2IdleDeadline?

        package init() {}

        package func handlerAdded(context: ChannelHandlerContext) {
            // A stream runs on its connection's event loop, so the connection's pipeline can be used at once.
            guard let parent = context.channel.parent, let connection = try? parent.pipeline.syncOperations.handler(type: HTTP2IdleDeadline.self)
            else { return }
            connection.streamOpened(try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID))
            self.connection = connection
        }

        package func handlerRemoved(context: ChannelHandlerContext) {
            connection?.streamClosed()
            connection = nil
        }
    }
}
