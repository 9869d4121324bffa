/// Why talking to NATS failed, and what to do about it.
public struct NATSError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// The server went away, or never finished the handshake: try again (another server).
        case unreachable
        /// Nothing accepted a connection at the address (nothing listens there, or it cannot be
        /// reached): start NATS there, or correct the address.
        case notListening
        /// The server refused the connection's credentials: fix them.
        case refused
        /// The server answered with `-ERR`.
        case serverError
        /// The server broke the protocol.
        case protocolViolation
        /// No acknowledgement came within the timeout.
        case timedOut
        /// JetStream refused a publish or an API request.
        case jetStream
        /// No stream listens on the subject, or the stream named does not exist: create it, or set `create_stream: true`.
        case noStream
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
