import NIOCore
import Synchronization

/// The streams on one event loop that have events to write, woken together.
///
/// The broker hands an event to every stream's mailbox from its own thread.
/// Waking each stream with a task of its own cost a closure, a task and the
/// loop's queue lock per stream and event: at 1000 streams, 1000 of each for
/// one row. Here the first stream that becomes ready schedules one task, and
/// that task pumps every stream that became ready meanwhile.
final class ReadyStreams<Stream: WakeableStream>: Sendable {
    private let ready = Mutex<[NIOLoopBound<Stream>]>([])
    let eventLoop: any EventLoop

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// Pumps `stream` on the loop soon; callable from any thread.
    func wake(_ stream: NIOLoopBound<Stream>) {
        let first = ready.withLock { ready in
            ready.append(stream)
            return ready.count == 1
        }
        if first { eventLoop.execute { self.drain() } }
    }

    private func drain() {
        let streams = ready.withLock { ready in
            defer { ready = [] }
            return ready
        }
        for stream in streams { stream.value.woken() }
    }
}

/// A stream that ``ReadyStreams`` pumps on its event loop.
protocol WakeableStream: AnyObject {
    /// Its subscription has something; called on the stream's event loop.
    func woken()
}
