import NIOCore

/// The timers that streams on one event loop share while they wait out the
/// write spacing.
///
/// A timer per stream costs a scheduled task, a heap insert and removal and
/// a timer reset for each write of each stream: at 100 streams and 1,000
/// events/s that was about a tenth of the daemon's time. Here due times are
/// rounded up to a grid, and the streams due on the same grid line share one
/// timer; streams written on the same tick stay on the same grid line.
///
/// It also keeps how late the loop runs what is due (streams woken by their
/// subscription, and its own ticks): streams are spaced only while the loop
/// is late, so one with headroom writes every batch at once.
final class WriteTicker: Sendable {
    /// What each scheduled tick runs: the streams waiting for it.
    private let waiters: NIOLoopBoundBox<[NIODeadline: [() -> Void]]>
    /// How late the loop runs what is due, in nanoseconds, a moving average over about 16 samples.
    private let lateness: NIOLoopBoundBox<Int64>

    let eventLoop: any EventLoop

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        waiters = .makeBoxSendingValue([:], eventLoop: eventLoop)
        lateness = .makeBoxSendingValue(0, eventLoop: eventLoop)
    }

    /// How late the loop has lately run what was due. Call it on ``eventLoop``.
    var lag: TimeAmount {
        .nanoseconds(lateness.value)
    }

    /// Something due at `due` runs now, on ``eventLoop``.
    func recordRun(dueAt due: NIODeadline) {
        let late = max(NIODeadline.now().uptimeNanoseconds, due.uptimeNanoseconds) - due.uptimeNanoseconds
        lateness.value += (Int64(clamping: late) - lateness.value) / 16
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
            recordRun(dueAt: tick)
            for waiter in waiters.value.removeValue(forKey: tick) ?? [] { waiter() }
        }
    }
}
