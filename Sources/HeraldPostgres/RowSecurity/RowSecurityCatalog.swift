import Herald

/// Reads what roles may select of tables: privileges, row-level security
/// and the applicable SELECT policies, for every role and table at once.
enum RowSecurityCatalog {
    /// Policies are printed with only `pg_catalog` on the path, so every
    /// other name in them comes schema-qualified and means the same under
    /// any role's search path.
    static let query = """
        SELECT r.rolname, n.nspname, c.relname,
          has_schema_privilege(r.oid, n.oid, 'USAGE')
            AND (has_table_privilege(r.oid, c.oid, 'SELECT') OR has_any_column_privilege(r.oid, c.oid, 'SELECT')) AS selectable,
          has_table_privilege(r.oid, c.oid, 'SELECT') AS whole_table,
          (SELECT coalesce(json_agg(a.attname ORDER BY a.attnum), '[]') FROM pg_attribute a
            WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
              AND has_column_privilege(r.oid, c.oid, a.attnum, 'SELECT')) AS columns,
          c.relrowsecurity AND NOT r.rolsuper AND NOT r.rolbypassrls
            AND (c.relforcerowsecurity OR NOT pg_has_role(r.oid, c.relowner, 'USAGE')) AS checks_policies,
          (SELECT coalesce(json_agg(json_build_array(p.polpermissive, pg_get_expr(p.polqual, p.polrelid)) ORDER BY p.polname), '[]')
            FROM pg_policy p
            WHERE p.polrelid = c.oid AND p.polcmd IN ('r', '*') AND p.polqual IS NOT NULL
              AND (0 = ANY (p.polroles) OR EXISTS (
                SELECT FROM unnest(p.polroles) AS applying(oid) WHERE applying.oid <> 0 AND pg_has_role(r.oid, applying.oid, 'USAGE')))
          ) AS policies
        FROM json_to_recordset($1::json) AS wanted(nspname text, relname text)
        JOIN pg_namespace n ON n.nspname = wanted.nspname
        JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = wanted.relname
        CROSS JOIN pg_roles r
        WHERE r.rolname IN (SELECT json_array_elements_text($2::json))
        """

    struct Key: Hashable {
        var role: String
        var table: TableName
    }

    /// What each of `roles` may select of each of `tables`; a pair missing
    /// from the answer (no such role or table) may select nothing.
    static func read(roles: Set<String>, tables: Set<TableName>, on connection: LibpqConnection) throws(LibpqError) -> [Key: TableAccess] {
        let wantedTables = JSONValue.array(tables.map { .object(["nspname": .string($0.schema), "relname": .string($0.name)]) })
        let wantedRoles = JSONValue.array(roles.map { .string($0) })
        let result = try connection.inTransaction { () throws(LibpqError) in
            try connection.execute("SET LOCAL search_path = pg_catalog")
            return try connection.execute(query, parameters: [wantedTables.jsonText, wantedRoles.jsonText])
        }
        var access: [Key: TableAccess] = [:]
        for values in result.rows {
            let row = ResultRow(columns: result.columns, values: values)
            guard let role = try row.text("rolname"), let schema = try row.text("nspname"), let name = try row.text("relname") else { continue }
            let columns = try? JSONParser.parse(Array((try row.text("columns") ?? "[]").utf8))
            var policies: (permissive: [String], restrictive: [String]) = ([], [])
            if case .array(let listed)? = try? JSONParser.parse(Array((try row.text("policies") ?? "[]").utf8)) {
                for case .array(let pair) in listed where pair.count == 2 {
                    guard let expression = pair[1].stringValue else { continue }
                    if pair[0] == .bool(true) { policies.permissive.append(expression) } else { policies.restrictive.append(expression) }
                }
            }
            let wholeTable = try row.text("whole_table") == "t"
            access[Key(role: role, table: TableName(schema: schema, name: name))] = TableAccess(
                isSelectable: try row.text("selectable") == "t",
                columns: wholeTable ? nil : Set(columns?.arrayValue?.compactMap(\.stringValue) ?? []),
                checksPolicies: try row.text("checks_policies") == "t",
                permissive: policies.permissive,
                restrictive: policies.restrictive
            )
        }
        return access
    }
}
