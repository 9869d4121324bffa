/// A PostgreSQL failure, with a one-line message that never contains a password.
public struct LibpqError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// The conninfo string or URI could not be parsed. Fix `--db`.
        case invalidConnectionString
        /// The server could not be reached or refused the connection (including authentication).
        case connectionFailed
        /// Connecting or a query took longer than allowed.
        case timedOut
        /// The server rejected a statement; `sqlState` says why.
        case queryFailed
        /// An established connection broke.
        case connectionLost
        /// The database's pgherald installation does not fit what was asked
        /// for; the message says which `pgherald install` to run.
        case incompatibleInstall
        /// Another daemon runs under the same `--name` on this database; the
        /// message names its host and pid. Stop it or choose another name.
        case nameInUse
        /// The listener's connection goes through a pooler that shares server
        /// sessions (transaction or statement mode), where LISTEN cannot work;
        /// the message says how to connect instead.
        case sharedSession
        /// The operation was abandoned because the caller is shutting down.
        case stopped
    }

    public var code: Code
    /// Human-readable, single-line and redacted.
    public var message: String
    /// The SQLSTATE of a server error, when there is one.
    public var sqlState: String?
    /// Where in the server a statement failed (a trigger, a function), one
    /// line, when the server said.
    public var context: String?

    public init(_ code: Code, _ message: String, sqlState: String? = nil, context: String? = nil) {
        self.code = code
        self.message = message
        self.sqlState = sqlState
        self.context = context
    }

    public var description: String { message }

    /// Joins libpq's multi-line messages into one line.
    static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline)
            .map { $0.trimmingPrefix(while: \.isWhitespace) }
            .filter { !$0.isEmpty }
            .joined(separator: "; ")
    }
}
