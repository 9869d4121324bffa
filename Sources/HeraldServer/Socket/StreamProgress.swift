import NIOCore
import Synchronization

/// When a stream last got bytes out, so that an overflowed stream is closed
/// only if its client has stopped reading, never while it is still draining.
final class StreamProgress: Sendable {
    /// A stream whose writes make no progress for this long is considered stalled.
    static let stallTimeout: Duration = .seconds(2)

    private let lastWrite = Mutex(ContinuousClock.now)
    /// A stream that falls behind again and again while it keeps reading gets one watch, not one per fall.
    private let watching = Atomic<Bool>(false)

    func recordWrite() {
        lastWrite.withLock { $0 = .now }
    }

    /// Closes `channel` once it cannot take more and its writes have made no
    /// progress for ``stallTimeout``; checks again while they still do, until
    /// ``caughtUp()``. A stream with nothing to send is never closed for it.
    func closeWhenStalled(_ channel: any Channel) {
        guard watching.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged else { return }
        watch(channel)
    }

    /// The stream is live again: the watch ends.
    func caughtUp() {
        watching.store(false, ordering: .relaxed)
    }

    private func watch(_ channel: any Channel) {
        channel.eventLoop.scheduleTask(in: .nanoseconds(Int64(Self.stallTimeout / .nanoseconds(1)))) {
            guard channel.isActive, self.watching.load(ordering: .relaxed) else { return }
            if !channel.isWritable, ContinuousClock.now - self.lastWrite.withLock({ $0 }) >= Self.stallTimeout {
                channel.close(promise: nil)
            } else {
                self.watch(channel)
            }
        }
    }
}
