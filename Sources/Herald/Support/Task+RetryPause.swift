extension Task where Success == Never, Failure == Never {
    /// Waits `duration` between the attempts of a retry loop; false once the
    /// task is cancelled, which should end the loop. `try? await Task.sleep`
    /// returns at once in a cancelled task, so a loop around it spins, and
    /// logs each turn, until something else ends it.
    public static func pauseBeforeRetry(for duration: Duration) async -> Bool {
        do {
            try await sleep(for: duration)
            return true
        } catch {
            return false
        }
    }
}
