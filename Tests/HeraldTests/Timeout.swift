/// Runs `body`, failing with `TimeoutError` if it takes longer than `seconds`.
func withTimeout<T: Sendable>(
    seconds: Double,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            throw TimeoutError(seconds: seconds)
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}

struct TimeoutError: Error, CustomStringConvertible {
    var seconds: Double
    var description: String { "timed out after \(seconds) s" }
}
