import HeraldPostgres

/// Statements run on the cluster's `postgres` database.
enum PostgresAdmin {
    @discardableResult
    static func execute(_ sql: String) throws -> PostgresConnection.QueryResult {
        let connection = try PostgresConnection.connect(ConnectionString(TestDatabase.clusterConnInfo ?? ""))
        return try connection.execute(sql)
    }
}
