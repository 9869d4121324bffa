public import Herald

extension SettingsReader {
    /// A filter written in the file in the socket's filter language: each key
    /// (one value or a list) stands for one query parameter; a list of `where`
    /// conditions is ANDed. A bad filter names the key it came from.
    public func filter(
        parameters: [(parameter: String, key: String)], reason: (FilterError) -> String
    ) throws(ConfigurationError) -> EventFilter {
        var items: [(name: String, value: String)] = []
        for (parameter, key) in parameters {
            guard let values = list(key) else { continue }
            record(key, values.joined(separator: parameter == "where" ? " AND " : ","))
            items += values.map { (parameter, $0) }
        }
        do {
            return try FilterQuery.parse(items)
        } catch {
            let key = parameters.first { $0.parameter == error.parameter }?.key ?? error.parameter
            throw fail(key, reason(error))
        }
    }

    /// The grant of a rule or key: `schemas`, `tables`, `ops`, `where`,
    /// `topics`, `queries` and the row-level security of `rls`, `role` and
    /// `claims` under `prefix`.
    public func grant(under prefix: String, tokenRole: String? = nil) throws(ConfigurationError) -> AccessGrant {
        var tables: [TablePattern]?
        if let schemas = list("\(prefix).schemas") {
            record("\(prefix).schemas", schemas.joined(separator: ", "))
            for schema in schemas {
                guard let pattern = TablePattern.schema(parsing: schema) else {
                    throw fail("\(prefix).schemas", "'\(schema.prefix(80))' is not a schema name or pattern such as reporting or tenant_*")
                }
                tables = (tables ?? []) + [pattern]
            }
        }
        if let names = list("\(prefix).tables") {
            record("\(prefix).tables", names.joined(separator: ", "))
            for table in names {
                guard let pattern = TablePattern(parsing: table) else {
                    throw fail("\(prefix).tables", "'\(table.prefix(80))' is not SCHEMA.TABLE or a pattern such as public.* (quote names with dots)")
                }
                tables = (tables ?? []) + [pattern]
            }
        }
        let filter = try filter(
            parameters: [("op", "\(prefix).ops"), ("where", "\(prefix).where")], reason: \.message
        )
        let topics = list("\(prefix).topics") ?? []
        if !topics.isEmpty { record("\(prefix).topics", topics.joined(separator: ", ")) }
        for topic in topics where topic.isEmpty || topic.dropLast().contains("*") || topic.contains(where: \.isWhitespace) || topic.hasPrefix("realtime:") {
            throw fail("\(prefix).topics", "'\(topic.prefix(80))' is not a topic name, or a prefix ending in * (without realtime:)")
        }
        let queries = list("\(prefix).queries") ?? []
        if !queries.isEmpty { record("\(prefix).queries", queries.joined(separator: ", ")) }
        for query in queries where query.isEmpty || query.dropLast().contains("*") || query.contains(where: \.isWhitespace) {
            throw fail("\(prefix).queries", "'\(query.prefix(80))' is not a query name, or a prefix ending in *")
        }
        return AccessGrant(
            tables: tables, operations: filter.operations, predicates: filter.predicates, topics: topics, queries: queries,
            rowSecurity: try rowSecurity(under: prefix, tokenRole: tokenRole)
        )
    }
}
