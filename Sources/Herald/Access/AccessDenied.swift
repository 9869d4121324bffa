/// A stream asked for what its peer's grant does not cover; nothing is subscribed.
public struct AccessDenied: Error, Hashable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
