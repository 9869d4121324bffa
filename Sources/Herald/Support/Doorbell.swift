import Synchronization

/// Wakes waiting tasks: a ring wakes everyone waiting, or is remembered for
/// the next wait when no one is, and many rings before it count as one.
public final class Doorbell: Sendable {
    private struct State {
        var rung = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    public init() {}

    public func ring() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard !state.waiters.isEmpty else {
                state.rung = true
                return []
            }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once rung (or at once if rung since the last wait), or after `timeout`.
    public func wait(timeout: Duration) async {
        if state.withLock({ state in defer { state.rung = false }; return state.rung }) { return }
        let timer = Task {
            guard (try? await Task.sleep(for: timeout)) != nil else { return }
            self.ring()
        }
        await withCheckedContinuation { continuation in
            let already = state.withLock { state -> Bool in
                if state.rung {
                    state.rung = false
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if already { continuation.resume() }
        }
        timer.cancel()
    }
}
