import Synchronization

/// Wakes one waiting task: rings are remembered until the next wait, and
/// many rings before it count as one.
final class Doorbell: Sendable {
    private struct State {
        var rung = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    func ring() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.rung = true
            return nil
        }
        waiter?.resume()
    }

    /// Returns once rung (or at once if rung since the last wait), or after `timeout`.
    func wait(timeout: Duration) async {
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
                state.waiter = continuation
                return false
            }
            if already { continuation.resume() }
        }
        timer.cancel()
    }
}
