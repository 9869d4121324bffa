/// Why a live query cannot be subscribed to or evaluated.
public struct LiveQueryError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        /// No query of that name is configured.
        case unknownQuery = "unknown_query"
        /// A parameter is missing or not declared: fix the request.
        case badParameters = "bad_parameters"
        /// The access rules do not grant the query, or a table it reads.
        case forbidden
        /// PostgreSQL refused the query, or its key is not unique: fix `queries.NAME`.
        case queryFailed = "query_failed"
        /// The database cannot be reached now; subscribe again later.
        case unavailable
    }

    public var code: Code
    /// What is wrong and what to do.
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
