public import Herald

/// Runs live queries, and checks them before they are served.
public enum LiveQueryRunner {
    /// What ``inspect(_:on:)`` learns of a query without running it for real.
    public struct Inspection: Sendable, Hashable {
        /// The tables its plan reads, or its `tables:` list.
        public var tables: [TableName]
        /// Its result columns.
        public var columns: [String]
    }

    /// Runs `definition` with `parameters` in one REPEATABLE READ, read-only
    /// transaction, so the rows never show half a transaction, and returns
    /// them with the snapshot they were read in.
    /// - Returns: the snapshot, and each row as a JSON object.
    public static func evaluate(
        _ definition: LiveQueryDefinition, parameters: [String], as identity: RowSecurityIdentity? = nil, on connection: LibpqConnection
    ) throws(LibpqError) -> (snapshot: TransactionSnapshot, rows: [RawJSON]) {
        let opened = try connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT pg_current_snapshot()::text")
        do throws(LibpqError) {
            if let identity {
                // As PostgREST runs a user's query: the role, and the claims its policies read.
                try connection.execute(try identity.becoming(on: connection))
            }
            guard let text = opened.rows.first?.first ?? nil, let snapshot = TransactionSnapshot(text) else {
                throw LibpqError(.queryFailed, "pg_current_snapshot() gave no snapshot")
            }
            let result = try connection.execute(
                "SELECT row_to_json(q)::text FROM (\(body(of: definition.sql))) q", parameters: parameters
            )
            try connection.execute("COMMIT")
            var rows: [RawJSON] = []
            rows.reserveCapacity(result.rows.count)
            for row in result.rows {
                let bytes = Array((row.first ?? nil)?.utf8 ?? "null".utf8)
                guard let json = try? bytes.withUnsafeBufferPointer({ try RawJSON(validating: $0) }) else {
                    throw LibpqError(.queryFailed, "query \(definition.name) returned a row that is not JSON")
                }
                rows.append(json)
            }
            return (snapshot, rows)
        } catch {
            _ = try? connection.execute("ROLLBACK")
            throw error
        }
    }

    /// Checks `definition` against the database without reading its rows:
    /// it parses as one read-only query, it uses exactly the parameters it
    /// declares, its key columns are among its result columns. Without a
    /// `tables:` list, the tables come from its generic plan (views are
    /// read through to their tables; a function's reads are not seen).
    /// Changes nothing: it runs in a transaction that is rolled back.
    public static func inspect(_ definition: LiveQueryDefinition, on connection: LibpqConnection) throws(LibpqError) -> Inspection {
        let nulls = definition.parameters.isEmpty ? "" : "(" + definition.parameters.map { _ in "NULL" }.joined(separator: ", ") + ")"
        try connection.execute("BEGIN READ ONLY; SET LOCAL plan_cache_mode = force_generic_plan")
        do throws(LibpqError) {
            let sql = body(of: definition.sql)
            do throws(LibpqError) {
                try connection.execute("PREPARE pgherald_live_query AS \(sql)")
                try connection.execute("PREPARE pgherald_live_columns AS SELECT * FROM (\(sql)) q LIMIT 0")
            } catch {
                throw LibpqError(.queryFailed, "query \(definition.name) does not parse: \(error.message)", sqlState: error.sqlState)
            }
            let declared = try connection.execute(
                "SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = 'pgherald_live_query'"
            ).rows.first?.first ?? nil
            if let declared, let count = Int(declared), count != definition.parameters.count {
                let names = definition.parameters.isEmpty ? "none" : definition.parameters.joined(separator: ", ")
                throw LibpqError(.queryFailed, "query \(definition.name) uses \(count) parameter(s) ($1…) but declares \(definition.parameters.count) (params: \(names))")
            }
            let columns = try connection.execute("EXECUTE pgherald_live_columns\(nulls)").columns
            for column in definition.key where !columns.contains(column) {
                throw LibpqError(.queryFailed, "query \(definition.name) has no result column \(column), which its key names (it has \(columns.joined(separator: ", ")))")
            }
            var tables = definition.tables
            if tables == nil {
                let plan = try connection.execute("EXPLAIN (VERBOSE, FORMAT JSON) EXECUTE pgherald_live_query\(nulls)").rows.first?.first ?? nil
                tables = relations(inPlan: plan ?? "[]")
            }
            try connection.execute("ROLLBACK")
            deallocate(on: connection)
            return Inspection(tables: tables ?? [], columns: columns)
        } catch {
            _ = try? connection.execute("ROLLBACK")
            deallocate(on: connection)
            throw error
        }
    }

    /// Prepared statements outlive the transaction; the connection serves every query.
    private static func deallocate(on connection: LibpqConnection) {
        for name in ["pgherald_live_query", "pgherald_live_columns"] {
            _ = try? connection.execute("DEALLOCATE \(name)")
        }
    }

    /// The tables a plan in EXPLAIN's JSON format scans, sorted, each once.
    static func relations(inPlan text: String) -> [TableName] {
        guard let plan = try? JSONParser.parse(Array(text.utf8)) else { return [] }
        var found = Set<TableName>()
        func walk(_ value: JSONValue) {
            switch value {
            case .object(let object):
                if case .string(let name)? = object["Relation Name"], case .string(let schema)? = object["Schema"] {
                    found.insert(TableName(schema: schema, name: name))
                }
                for member in object { walk(member.value) }
            case .array(let values):
                values.forEach(walk)
            default:
                break
            }
        }
        walk(plan)
        return found.sorted()
    }

    /// The query without what would end it early: a final semicolon.
    static func body(of sql: String) -> String {
        var text = Substring(sql)
        while let last = text.last, last == ";" || last.isWhitespace { text = text.dropLast() }
        return String(text)
    }
}
