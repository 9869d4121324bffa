/// Polls `condition` until it holds, failing after `seconds` with `failure()`.
///
/// Runs on the caller's actor, so a main-actor test can poll main-actor state.
func waitFor(
    seconds: Double = 15,
    isolation: isolated (any Actor)? = #isolation,
    _ condition: () async throws -> Bool,
    failure: () -> String = { "condition not met" }
) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw ProcessTimeout(description: "\(failure()) within \(seconds) s") }
        try await Task.sleep(for: .milliseconds(10))
    }
}
