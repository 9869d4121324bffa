import NIOCore
import Synchronization

/// When a stream last got bytes out, so that an overflowed stream is closed
/// only if its client has stopped reading, never while it is still draining.
final class StreamProgress: Sendable {
    /// A stream whose writes make no progress for this long is considered stalled.
    static let stallTimeout: Duration = .seconds(2)

    private let lastWrite = Mutex(ContinuousClock.now)

    func recordWrite() {
        lastWrite.withLock { $0 = .now }
    }

    /// Closes `channel` once its writes have made no progress for ``stallTimeout``;
    /// checks again while they still do.
    func closeWhenStalled(_ channel: any Channel) {
        channel.eventLoop.scheduleTask(in: .nanoseconds(Int64(Self.stallTimeout / .nanoseconds(1)))) {
            guard channel.isActive else { return }
            if ContinuousClock.now - self.lastWrite.withLock({ $0 }) >= Self.stallTimeout {
                channel.close(promise: nil)
            } else {
                self.closeWhenStalled(channel)
            }
        }
    }
}
