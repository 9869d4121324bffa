/// Why the client gave up on a request.
public struct HeraldClientError: Error, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// The daemon refused the subscription (HTTP 400): fix the filter; retrying will not help.
        case rejected
        /// The daemon's access rules do not let this user see what the
        /// subscription asks for (HTTP 403): ask for less, or for a grant.
        case forbidden
        /// The daemon answered with something that is not what pgherald sends.
        case protocolError
        /// The daemon could not be reached.
        case unavailable
        /// Over the network, the token is missing, wrong or expired (HTTP
        /// 401), or the token provider failed: sign in again.
        case unauthorized
    }

    public var code: Code
    public var message: String

    public var description: String { message }
}
