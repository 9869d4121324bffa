/// An output that keeps the deliveries it gave up on, so that an operator
/// can see them and send them again (the console's replay button).
public protocol DeadLetterQueue: Sendable {
    /// The deliveries given up on, oldest first, at most `limit`.
    func deadLetterSummaries(limit: Int) async throws -> [DeadLetterSummary]

    /// Queues the delivery `id` again, to be sent at once.
    /// - Returns: false when there is no such dead letter (already replayed, say).
    func replayDeadLetter(id: Int64) async throws -> Bool
}

/// One delivery given up on, without its body: what the console lists.
public struct DeadLetterSummary: Codable, Sendable, Hashable {
    public var id: Int64
    /// The output's own name for where it was going: the webhook endpoint.
    public var destination: String
    public var eventID: String
    public var attempts: Int
    public var lastStatus: Int?
    public var error: String
    /// ISO 8601, UTC.
    public var failedAt: String

    public init(id: Int64, destination: String, eventID: String, attempts: Int, lastStatus: Int?, error: String, failedAt: String) {
        self.id = id
        self.destination = destination
        self.eventID = eventID
        self.attempts = attempts
        self.lastStatus = lastStatus
        self.error = error
        self.failedAt = failedAt
    }
}
