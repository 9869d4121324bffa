/// The server sent something the NATS protocol does not allow; the connection cannot go on.
public struct NATSProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { "NATS protocol error: \(message)" }
}
