/// What a NATS server sends a client, one protocol operation at a time.
public enum NATSServerOperation: Sendable, Equatable {
    /// `INFO {…}`: the server's identity and limits, first on every connection.
    case info(NATSServerInfo)
    /// `MSG` or `HMSG`: a message on a subscription.
    case message(NATSMessage)
    case ping
    case pong
    /// `+OK`, in verbose mode only.
    case ok
    /// `-ERR '…'`: the text between the quotes. Most close the connection.
    case error(String)
}

/// A message delivered to a subscription (`MSG`, or `HMSG` with headers).
public struct NATSMessage: Sendable, Equatable {
    public var subject: String
    public var subscriptionID: String
    public var replyTo: String?
    /// `NATS/1.0` headers in order; a header's name may repeat.
    public var headers: [(name: String, value: String)]
    /// The status line's code after `NATS/1.0` (for example 503 "no responders"), when it has one.
    public var status: Int?
    public var payload: [UInt8]

    public init(subject: String, subscriptionID: String, replyTo: String? = nil, headers: [(name: String, value: String)] = [], status: Int? = nil, payload: [UInt8]) {
        self.subject = subject
        self.subscriptionID = subscriptionID
        self.replyTo = replyTo
        self.headers = headers
        self.status = status
        self.payload = payload
    }

    public static func == (lhs: NATSMessage, rhs: NATSMessage) -> Bool {
        lhs.subject == rhs.subject && lhs.subscriptionID == rhs.subscriptionID && lhs.replyTo == rhs.replyTo
            && lhs.headers.map(\.name) == rhs.headers.map(\.name) && lhs.headers.map(\.value) == rhs.headers.map(\.value)
            && lhs.status == rhs.status && lhs.payload == rhs.payload
    }
}
