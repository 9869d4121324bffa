import NIOCore
import Synchronization

/// When a stream last got bytes out, so that an overflowed stream is closed
/// only if its client has stopped reading, never while it is still draining.
final class StreamProgress: Sendable {
    /// A stream whose writes make no progress for this long is considered stalled.
    static let stallTimeout: TimeAmount = .seconds(2)

    /// The last write's `NIODeadline`, in nanoseconds: an atomic, as every write stamps it.
    private let lastWrite = Atomic<UInt64>(NIODeadline.now().uptimeNanoseconds)
    /// A stream that falls behind again and again while it keeps reading gets one watch, not one per fall.
    private let watching = Atomic<Bool>(false)

    /// Notes a write at `time`; a caller that has just read the clock passes what it read.
    func recordWrite(at time: NIODeadline = .now()) {
        lastWrite.store(time.uptimeNanoseconds, ordering: .relaxed)
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
        channel.eventLoop.scheduleTask(in: Self.stallTimeout) {
            guard channel.isActive, self.watching.load(ordering: .relaxed) else { return }
            let lastWrite = NIODeadline.uptimeNanoseconds(self.lastWrite.load(ordering: .relaxed))
            if !channel.isWritable, NIODeadline.now() - lastWrite >= Self.stallTimeout {
                channel.close(promise: nil)
            } else {
                self.watch(channel)
            }
        }
    }
}
