import NIOCore

/// The timers that streams on one event loop share while they wait out the
/// write spacing.
///
/// A timer per stream costs a scheduled task, a heap insert and removal and
/// a timer reset for each write of each stream: at 100 streams and 1,000
/// events/s that was about a tenth of the daemon's time. Here due times are
/// rounded up to a grid, and the streams due on the same grid line share one
/// timer; streams written on the same tick stay on the same grid line.
final class WriteTicker: Sendable {
    /// What each scheduled tick runs: the streams waiting for it.
    private let waiters: NIOLoopBoundBox<[NIODeadline: [() -> Void]]>

    let eventLoop: any EventLoop

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        waiters = .makeBoxSendingValue([:], eventLoop: eventLoop)
    }

    /// `due` rounded up to a multiple of `grid`.
    static func tick(for due: NIODeadline, grid: TimeAmount) -> NIODeadline {
        let step = max(grid.nanoseconds, 1)
        let nanoseconds = Int64(due.uptimeNanoseconds)
        return .uptimeNanoseconds(UInt64((nanoseconds + step - 1) / step * step))
    }

    /// Runs `body` at the first tick on `grid` at or after `due`, never
    /// before `due`. Call it on ``eventLoop``, where the streams write.
    func schedule(at due: NIODeadline, grid: TimeAmount, _ body: @escaping () -> Void) {
        eventLoop.assertInEventLoop()
        let tick = Self.tick(for: due, grid: grid)
        if waiters.value[tick] != nil {
            waiters.value[tick]!.append(body)
            return
        }
        waiters.value[tick] = [body]
        eventLoop.assumeIsolated().scheduleTask(deadline: tick) { [self] in
            for waiter in waiters.value.removeValue(forKey: tick) ?? [] { waiter() }
        }
    }
}
