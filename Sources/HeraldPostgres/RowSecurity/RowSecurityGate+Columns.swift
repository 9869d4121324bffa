public import Herald

extension RowSecurityGate {
    /// PostgreSQL's words for a column `filter` compares that the role of
    /// `identity` may not select; nil when it may read each one.
    ///
    /// A filter is evaluated on what the subscriber sees, so a hidden column
    /// would only ever fail to match; refusing it at once says why, and
    /// leaves no path (a replay, an edge) where it could be evaluated on the
    /// row as written. With no table named, the tables the role can read
    /// some of are checked: a table it cannot see at all is not its concern.
    /// - Throws: ``RowSecurityError`` when the catalog cannot be read.
    public func columnRefusal(for filter: EventFilter, as identity: RowSecurityIdentity) async throws(RowSecurityError) -> String? {
        let columns = Set(filter.predicates.map(\.column))
        guard !columns.isEmpty, filter.operations != .broadcast else { return nil }
        let wantedColumns = JSONValue.array(columns.sorted().map { .string($0) }).jsonText
        let wantedTables = filter.tables.map { tables in
            JSONValue.array(tables.sorted().map { .object(["nspname": .string($0.schema), "relname": .string($0.name)]) }).jsonText
        }
        do {
            return try await connection.run { connection throws(LibpqError) -> String? in
                let hidden = try connection.execute(Self.hiddenColumnQuery, parameters: [wantedColumns, wantedTables, identity.role])
                guard let row = hidden.rows.first, row.count == 3, let table = row[1], let column = row[2] else { return nil }
                // PostgreSQL's words for a column (aclcheck_error_col), without running a statement as the role:
                // its policies would be planned, and may fail for reasons of their own.
                return "permission denied for column \"\(column)\" of relation \"\(table)\""
            }
        } catch {
            throw RowSecurityError(reason: "cannot check the filter's columns: \(error.message)")
        }
    }

    /// The first of the columns `$1` (a JSON array) in the tables `$2` (a
    /// JSON array of schema and name; NULL: every table the role `$3` can
    /// read some of) that the role may not select.
    static let hiddenColumnQuery = """
        SELECT n.nspname, c.relname, a.attname
        FROM pg_catalog.pg_attribute a
        JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
        JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
        WHERE a.attname IN (SELECT pg_catalog.json_array_elements_text($1::pg_catalog.json))
          AND a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
          AND CASE WHEN $2::pg_catalog.json IS NULL
            THEN pg_catalog.has_any_column_privilege($3, c.oid, 'SELECT')
              AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pgherald')
            ELSE EXISTS (SELECT FROM pg_catalog.json_to_recordset($2::pg_catalog.json) AS wanted(nspname text, relname text)
              WHERE wanted.nspname = n.nspname AND wanted.relname = c.relname)
          END
          AND NOT pg_catalog.has_column_privilege($3, c.oid, a.attnum, 'SELECT')
        ORDER BY n.nspname, c.relname, a.attnum
        LIMIT 1
        """
}
