public import Herald
public import HeraldPostgres

extension WebhookService {
    /// An endpoint whose filter names a table or column the database does not have, or a value its column cannot hold.
    public struct FilterProblem: Error, CustomStringConvertible {
        /// The endpoint's name.
        public var endpoint: String
        public var problem: FilterError

        public var description: String {
            "webhooks.\(endpoint).\(problem.parameter): \(problem.message); the endpoint would never match "
                + "(a filter is checked as GET /events checks it: fix the name, or create the column first)"
        }
    }

    /// Checks every endpoint's filter against the database, as the socket checks a stream's.
    /// - Returns: the first endpoint whose filter can never match, with why.
    public static func filterProblem(in endpoints: [WebhookEndpoint], catalog: SchemaCatalog) async throws -> FilterProblem? {
        for endpoint in endpoints where endpoint.filter != .all {
            if let problem = try await catalog.validate(endpoint.filter) {
                return FilterProblem(endpoint: endpoint.name, problem: problem)
            }
        }
        return nil
    }
}
