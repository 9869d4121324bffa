import NIOCore
import Synchronization

/// Wakes a realtime socket's channels when the socket takes writes again.
///
/// A channel frames its next events only once its socket is writable: each
/// channel of a client that does not read held a framed batch otherwise, and
/// one user's thousand channels on rows of 1 MB held gigabytes and took the
/// cores for seconds to frame them. Waiting, a channel holds only its
/// mailbox's references to events the broker shares, bounded as before.
final class WritabilityWaiters: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Never

    private var waiting: [UInt64: CheckedContinuation<Void, Never>] = [:]

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { resumeAll() }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        resumeAll()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        resumeAll()
    }

    private func resumeAll() {
        let resumed = waiting.values
        waiting = [:]
        for continuation in resumed { continuation.resume() }
    }

    /// A channel's handle on its socket's waiters.
    struct Waiter: Sendable {
        private static let nextID = Atomic<UInt64>(0)
        private let handler: NIOLoopBound<WritabilityWaiters>
        private let channel: any Channel

        /// `nil` unless called on the channel's event loop with the waiters in its pipeline.
        init?(channel: any Channel) {
            guard channel.eventLoop.inEventLoop, let handler = try? channel.pipeline.syncOperations.handler(type: WritabilityWaiters.self) else { return nil }
            self.handler = NIOLoopBound(handler, eventLoop: channel.eventLoop)
            self.channel = channel
        }

        /// Returns once the socket is writable (true), or closed or the task cancelled (false).
        func untilWritable() async -> Bool {
            while channel.isActive, !channel.isWritable, !Task.isCancelled {
                let id = Self.nextID.wrappingAdd(1, ordering: .relaxed).newValue
                // Both closures run on the event loop, in order: a cancellation before the registration is seen by it.
                let cancelled = Cancelled()
                let (handler, channel) = (handler, channel)
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        channel.eventLoop.execute {
                            guard channel.isActive, !channel.isWritable, !cancelled.flag.load(ordering: .relaxed) else { return continuation.resume() }
                            handler.value.waiting[id] = continuation
                        }
                    }
                } onCancel: {
                    cancelled.flag.store(true, ordering: .relaxed)
                    channel.eventLoop.execute { handler.value.waiting.removeValue(forKey: id)?.resume() }
                }
            }
            return channel.isActive && !Task.isCancelled
        }

        private final class Cancelled: Sendable {
            let flag = Atomic(false)
        }
    }
}
