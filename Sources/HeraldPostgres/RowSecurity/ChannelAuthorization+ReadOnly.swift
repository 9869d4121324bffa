import Herald

extension ChannelAuthorization {
    /// The policies on `realtime.messages` that apply to a role, with the
    /// privileges around them, as the catalog says now. Expressions are
    /// printed with only `pg_catalog` on the path, as ``RowSecurityCatalog``
    /// prints them, so that they mean the same under the role's path.
    static let policiesQuery = """
        SELECT has_schema_privilege(r.oid, c.relnamespace, 'USAGE') AND has_table_privilege(r.oid, c.oid, 'SELECT') AS selects,
          has_schema_privilege(r.oid, c.relnamespace, 'USAGE') AND has_table_privilege(r.oid, c.oid, 'INSERT') AS inserts,
          c.relrowsecurity AND NOT r.rolsuper AND NOT r.rolbypassrls
            AND (c.relforcerowsecurity OR NOT pg_has_role(r.oid, c.relowner, 'USAGE')) AS checks_policies,
          (SELECT coalesce(json_agg(json_build_array(p.polcmd, p.polpermissive,
              pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid)) ORDER BY p.polname), '[]')
            FROM pg_policy p
            WHERE p.polrelid = c.oid AND p.polcmd IN ('r', 'a', '*')
              AND (0 = ANY (p.polroles) OR EXISTS (
                SELECT FROM unnest(p.polroles) AS applying(oid) WHERE applying.oid <> 0 AND pg_has_role(r.oid, applying.oid, 'USAGE')))
          ) AS policies
        FROM pg_class c CROSS JOIN pg_roles r
        WHERE c.oid = 'realtime.messages'::regclass AND r.rolname = $1
        """

    /// ``check(topic:as:on:)`` where nothing can be written, as on a read
    /// replica that an edge reads: each policy's expression judges the
    /// message that Supabase's check would insert, built in memory, as
    /// PostgreSQL would combine them. SELECT policies (their USING) decide
    /// reading; INSERT policies (their WITH CHECK, or an ALL policy's USING
    /// where it has none) decide writing, as for the user's own insert.
    static func checkWithoutWriting(topic: String, as identity: RowSecurityIdentity, on connection: LibpqConnection) throws(LibpqError) -> ChannelAuthorization {
        let catalog = try connection.inTransaction { () throws(LibpqError) in
            try connection.execute("SET LOCAL search_path = pg_catalog")
            return try connection.execute(policiesQuery, parameters: [identity.role])
        }
        // A role that does not exist may do nothing; becoming it below would fail.
        guard let values = catalog.rows.first else { return ChannelAuthorization() }
        let row = ResultRow(columns: catalog.columns, values: values)
        var read = TableAccess(isSelectable: try row.text("selects") == "t", columns: nil, checksPolicies: try row.text("checks_policies") == "t")
        var write = TableAccess(isSelectable: try row.text("inserts") == "t", columns: nil, checksPolicies: read.checksPolicies)
        if case .array(let policies)? = try? JSONParser.parse(Array((try row.text("policies") ?? "[]").utf8)) {
            for case .array(let policy) in policies where policy.count == 4 {
                let (command, permissive) = (policy[0].stringValue, policy[1] == .bool(true))
                if command == "r" || command == "*", let using = policy[2].stringValue {
                    if permissive { read.permissive.append(using) } else { read.restrictive.append(using) }
                }
                if command == "a" || command == "*", let check = policy[3].stringValue ?? (command == "*" ? policy[2].stringValue : nil) {
                    if permissive { write.permissive.append(check) } else { write.restrictive.append(check) }
                }
            }
        }
        func sql(_ access: TableAccess) -> String {
            guard access.isSelectable else { return "false" }
            return switch access.condition {
            case .everyRow: "true"
            case .noRow: "false"
            case .expression(let expression): expression
            }
        }
        let topicText = try connection.escapeLiteral(topic)
        let (results, error) = try connection.executeScript("""
            BEGIN READ ONLY;
            SET LOCAL statement_timeout = '5s';
            \(try identity.becoming(on: connection))SELECT set_config('realtime.topic', \(topicText), true);
            SELECT pgherald_kind.pgherald_extension, coalesce(\(sql(read)), false), coalesce(\(sql(write)), false)
            FROM (VALUES ('broadcast'), ('presence')) AS pgherald_kind(pgherald_extension)
            CROSS JOIN LATERAL jsonb_populate_record(NULL::realtime.messages, jsonb_build_object(
              'topic', \(topicText), 'extension', pgherald_kind.pgherald_extension, 'private', true, 'event', 'pgherald.authorization',
              'payload', '{}'::jsonb, 'inserted_at', localtimestamp, 'updated_at', localtimestamp)) AS messages;
            ROLLBACK
            """)
        if let error {
            try connection.execute("ROLLBACK")
            throw error
        }
        var authorization = ChannelAuthorization()
        for answer in results[5].rows {
            let (reads, writes) = (answer[1] == "t", answer[2] == "t")
            if answer[0] == "broadcast" {
                (authorization.readsBroadcast, authorization.writesBroadcast) = (reads, writes)
            } else {
                (authorization.readsPresence, authorization.writesPresence) = (reads, writes)
            }
        }
        return authorization
    }
}
