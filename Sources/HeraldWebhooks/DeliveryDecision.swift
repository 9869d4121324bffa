/// What happens to a pending delivery after an attempt: a pure function of
/// the outcome, the attempts made, the event's age and the endpoint's limits.
public enum DeliveryDecision: Sendable, Hashable {
    /// Delivered: the row goes.
    case done
    /// Try again after this long.
    case retry(after: Duration)
    /// Give up: the row moves to the dead letters with this reason.
    case deadLetter(reason: String)

    /// - Parameters:
    ///   - attempts: attempts made so far, this one included.
    ///   - age: time since the event was queued for the endpoint.
    ///   - jitter: a random number in `[0, 1)`.
    public static func after(
        _ outcome: DeliveryOutcome,
        attempts: Int,
        age: Duration,
        limits: WebhookEndpoint.Limits,
        schedule: RetrySchedule,
        jitter: Double
    ) -> DeliveryDecision {
        switch outcome {
        case .delivered:
            return .done
        case .permanent(_, let error):
            return .deadLetter(reason: "\(error): the receiver refused the event, so it is not retried")
        case .retryable(_, let error, let retryAfter):
            if attempts >= limits.maximumAttempts {
                return .deadLetter(reason: "\(error) on the last of \(limits.maximumAttempts) attempts (max_attempts)")
            }
            let wait = retryAfter.map { min($0, schedule.cap) } ?? schedule.delay(afterFailures: attempts, jitter: jitter)
            if age + wait > limits.maximumAge {
                return .deadLetter(reason: "\(error); the next attempt would come after max_age (\(limits.maximumAge.secondsText))")
            }
            return .retry(after: wait)
        }
    }
}
