public import HeraldOutput

extension WebhookService: DeadLetterQueue {
    public func deadLetterSummaries(limit: Int) async throws -> [DeadLetterSummary] {
        try await store.deadLetters(limit: limit).map { letter in
            DeadLetterSummary(
                id: letter.id, destination: letter.endpoint, eventID: letter.eventID, attempts: letter.attempts,
                lastStatus: letter.lastStatus, error: letter.error, failedAt: letter.failedAt
            )
        }
    }

    public func replayDeadLetter(id: Int64) async throws -> Bool {
        let queued = try await store.replay(ids: [id], endpoint: nil).queued
        if queued > 0 { logger.notice("a dead letter was queued again from the console", metadata: ["dead_letter": "\(id)"]) }
        return queued > 0
    }
}
