extension Installer {
    /// Why the session's role cannot run serve on this database, in words that say what to run;
    /// nil when it can: it is a superuser, belongs to the pgherald schema's owner, or holds
    /// what `install --daemon-role` grants. For `check-config --connect`.
    public static func daemonRoleProblem(on connection: LibpqConnection) throws(LibpqError) -> String? {
        let result = try connection.execute("""
            SELECT session_user, n.oid IS NOT NULL, r.rolsuper OR coalesce(pg_has_role(session_user, n.nspowner, 'USAGE'), false),
                   pg_get_userbyid(n.nspowner)
              FROM pg_roles r LEFT JOIN pg_namespace n ON n.nspname = 'pgherald'
             WHERE r.rolname = session_user
            """)
        guard let row = result.rows.first, let role = row[0] else { return nil }
        guard row[1] == "t" else {
            return "pgherald is not installed in this database: run pgherald install as the database's owner"
        }
        if row[2] == "t" { return nil }
        let owner = row[3] ?? "the schema's owner"
        // Everything that install --daemon-role grants, so that the check and the grant agree.
        let missing = try connection.execute("""
            SELECT 'USAGE ON SCHEMA pgherald' WHERE NOT has_schema_privilege('pgherald', 'USAGE')
            UNION ALL
            SELECT format('%s ON %s', p.privilege, c.oid::regclass)
              FROM pg_class c
              JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'pgherald'
             CROSS JOIN LATERAL unnest(CASE c.relkind
                 WHEN 'S' THEN ARRAY['USAGE', 'SELECT', 'UPDATE']
                 WHEN 'v' THEN ARRAY['SELECT']
                 ELSE ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE'] END) AS p(privilege)
             WHERE c.relkind IN ('r', 'p', 'v', 'S')
               AND NOT CASE c.relkind WHEN 'S' THEN has_sequence_privilege(c.oid, p.privilege) ELSE has_table_privilege(c.oid, p.privilege) END
            UNION ALL
            SELECT format('EXECUTE ON FUNCTION %s', f.oid::regprocedure)
              FROM pg_proc f JOIN pg_namespace n ON n.oid = f.pronamespace AND n.nspname = 'pgherald'
             WHERE NOT has_function_privilege(f.oid, 'EXECUTE')
            """).rows.compactMap { $0[0] }
        guard let first = missing.first else { return nil }
        let more = missing.count > 1 ? " and \(missing.count - 1) more" : ""
        return "database role \(role) lacks what serve needs in the pgherald schema (\(first)\(more)): "
            + "run pgherald install --daemon-role \(role) as \(owner), the schema's owner, or run serve as \(owner)"
    }
}
