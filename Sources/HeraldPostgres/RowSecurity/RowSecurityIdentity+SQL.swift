public import Herald

extension RowSecurityIdentity {
    /// The two statements that make a transaction evaluate as this identity,
    /// as PostgREST does: `SET LOCAL ROLE` and `request.jwt.claims`, each
    /// ending in `;` and a newline. Every check as a subscriber starts with
    /// them, so that all of them become the same identity the same way.
    /// - Parameters:
    ///   - quote: quotes text as an SQL literal (libpq's `PQescapeLiteral`).
    ///   - quoteIdentifier: quotes a name (libpq's `PQescapeIdentifier`).
    func becoming(
        quote: (String) throws(LibpqError) -> String, quoteIdentifier: (String) throws(LibpqError) -> String
    ) throws(LibpqError) -> String {
        "SET LOCAL ROLE \(try quoteIdentifier(role));\nSELECT set_config('request.jwt.claims', \(try quote(claimsText)), true);\n"
    }

    /// ``becoming(quote:quoteIdentifier:)`` quoted by `connection`.
    func becoming(on connection: LibpqConnection) throws(LibpqError) -> String {
        try becoming(quote: connection.escapeLiteral, quoteIdentifier: connection.escapeIdentifier)
    }
}
