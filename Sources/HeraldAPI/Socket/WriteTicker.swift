import HeraldHTTP
import Logging
import NIOCore

/// What the streams on one event loop share to space their writes: the
/// loop's ``WritePacing``, the timers they wait on, and the ``ReadyStreams``
/// that wake them together.
///
/// A timer per stream costs a scheduled task, a heap insert and removal and
/// a timer reset for each write of each stream: at 100 streams and 1,000
/// events/s that was about a tenth of the daemon's time. Here due times are
/// rounded up to a grid, and the streams due on the same grid line share one
/// timer; streams written on the same tick stay on the same grid line.
final class WriteTicker: Sendable {
    private struct State {
        var pacing: WritePacing
        /// What each scheduled tick runs: the streams waiting for it.
        var waiters: [NIODeadline: [() -> Void]] = [:]
    }

    private let state: NIOLoopBoundBox<State>
    private let logger: Logger

    let eventLoop: any EventLoop
    let ready: ReadyStreams<EventStreamHandler>

    init(eventLoop: any EventLoop, pacing: WritePacing.Policy = .init(), logger: Logger) {
        self.eventLoop = eventLoop
        ready = ReadyStreams(eventLoop: eventLoop)
        self.logger = logger
        state = .makeBoxSendingValue(State(pacing: WritePacing(policy: pacing, now: .now())), eventLoop: eventLoop)
    }

    /// `due` rounded up to a multiple of `grid`.
    static func tick(for due: NIODeadline, grid: TimeAmount) -> NIODeadline {
        let step = max(grid.nanoseconds, 1)
        let nanoseconds = Int64(due.uptimeNanoseconds)
        return .uptimeNanoseconds(UInt64((nanoseconds + step - 1) / step * step))
    }

    /// The loop's spacing between a stream's writes now; nil: at once.
    var spacing: TimeAmount? {
        state.value.pacing.spacing
    }

    /// Counts a stream's work on the loop, from `start` to `end`, toward its pacing.
    func recordWork(from start: NIODeadline, to end: NIODeadline) {
        switch state.value.pacing.recordWork(from: start, to: end) {
        case .started(let spacing)?:
            logger.debug("streams on an event loop are written at most every \(spacing.nanoseconds / 1000) µs: writing keeps the loop busy")
        case .stopped?:
            logger.debug("streams on an event loop are written at once again")
        case nil:
            break
        }
    }

    /// When a stream written at `lastWrite` may be written again, and the
    /// grid that due time is rounded up to; nil: at once. `ceiling` is the
    /// least spacing, if ``SocketConfiguration/writeRate`` sets one.
    func nextWrite(after lastWrite: NIODeadline, ceiling: TimeAmount?) -> (due: NIODeadline, grid: TimeAmount)? {
        let spacing = max(spacing ?? .zero, ceiling ?? .zero)
        // Below this, the wait costs more than the write it would save.
        guard spacing > .microseconds(100) else { return nil }
        // Streams due within a quarter of the spacing of each other share a timer.
        return (lastWrite + spacing, .nanoseconds(spacing.nanoseconds / 4))
    }

    /// Runs `body` at the first tick on `grid` at or after `due`, never
    /// before `due`. Call it on ``eventLoop``, where the streams write.
    func schedule(at due: NIODeadline, grid: TimeAmount, _ body: @escaping () -> Void) {
        eventLoop.assertInEventLoop()
        let tick = Self.tick(for: due, grid: grid)
        if state.value.waiters[tick] != nil {
            state.value.waiters[tick]!.append(body)
            return
        }
        state.value.waiters[tick] = [body]
        eventLoop.assumeIsolated().scheduleTask(deadline: tick) { [self] in
            for waiter in state.value.waiters.removeValue(forKey: tick) ?? [] { waiter() }
        }
    }
}
