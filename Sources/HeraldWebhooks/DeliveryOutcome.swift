/// What one attempt to deliver an event came to.
public enum DeliveryOutcome: Sendable, Hashable {
    /// A 2xx answer.
    case delivered(status: Int)
    /// Worth trying again: a network error, a timeout, 408, 409, 425, 429 or 5xx.
    case retryable(status: Int?, error: String, retryAfter: Duration?)
    /// The receiver refused the event itself (another 4xx, or a redirect): retrying cannot help.
    case permanent(status: Int, error: String)

    /// Classifies an HTTP answer.
    public static func answer(status: Int, retryAfter: Duration?) -> DeliveryOutcome {
        switch status {
        case 200..<300: .delivered(status: status)
        case 408, 409, 425, 429, 500...: .retryable(status: status, error: "HTTP \(status)", retryAfter: retryAfter)
        default: .permanent(status: status, error: "HTTP \(status)")
        }
    }

    /// The status, when the receiver answered.
    public var status: Int? {
        switch self {
        case .delivered(let status), .permanent(let status, _): status
        case .retryable(let status, _, _): status
        }
    }

    public var error: String? {
        switch self {
        case .delivered: nil
        case .retryable(_, let error, _), .permanent(_, let error): error
        }
    }
}
