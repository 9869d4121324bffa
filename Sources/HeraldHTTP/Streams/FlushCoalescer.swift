import NIOCore

/// Turns the flushes of one event-loop turn into one, on an HTTP/2
/// connection beneath its streams.
///
/// Each stream of a connection flushes its own batch, and each such flush
/// would be a TLS record and a system call of its own: a browser tab's 100
/// streams cost 100 of each per event. Held until the loop's current tasks
/// have run, they leave as one write of many frames. The wait is the rest
/// of the turn, microseconds.
final class FlushCoalescer: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = NIOAny
    typealias OutboundOut = NIOAny

    private var flushScheduled = false

    func flush(context: ChannelHandlerContext) {
        guard !flushScheduled else { return }
        flushScheduled = true
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (coalescer, context) = bound.value
            coalescer.flushScheduled = false
            context.flush()
        }
    }
}
