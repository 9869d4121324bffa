import NIOCore

/// The timer that streams on one event loop share while they wait out the
/// write spacing.
///
/// A timer per stream costs a scheduled task, a heap insert and removal and
/// a timer reset for each write of each stream: at 100 streams and 1,000
/// events/s that was about a tenth of the daemon's time. Here a stream joins
/// the tick already pending when that comes no later than its own due time,
/// so the streams of a loop soon write on the same ticks, one timer for all.
final class WriteTicker: Sendable {
    private struct State {
        var waiters: [CheckedContinuation<Void, Never>] = []
        /// The earliest tick scheduled and not yet fired.
        var nextTick: NIODeadline?
    }

    let eventLoop: any EventLoop
    private let state: NIOLoopBoundBox<State>

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        state = .makeBoxSendingValue(State(), eventLoop: eventLoop)
    }

    /// Returns at `due` or at an earlier tick. Call it on ``eventLoop``,
    /// where the stream tasks run.
    func wait(until due: NIODeadline) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            eventLoop.assertInEventLoop()
            state.value.waiters.append(continuation)
            if let next = state.value.nextTick, next <= due { return }
            state.value.nextTick = due
            eventLoop.scheduleTask(deadline: due) {}.futureResult.whenComplete { [self] _ in fire(scheduledFor: due) }
        }
    }

    private func fire(scheduledFor deadline: NIODeadline) {
        if state.value.nextTick == deadline { state.value.nextTick = nil }
        let waiters = state.value.waiters
        state.value.waiters = []
        for waiter in waiters { waiter.resume() }
    }
}
