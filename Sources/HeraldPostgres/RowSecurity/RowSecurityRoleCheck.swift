/// Whether pgherald's own database role can check as the roles that
/// `rls: true` names, for `check-config --connect`.
public enum RowSecurityRoleCheck {
    /// What is wrong with one role, in words that say what to run.
    public struct Problem: Sendable, Hashable, CustomStringConvertible {
        public var role: String
        public var message: String
        /// False for a warning: the daemon works, but not as one may expect.
        public var isError: Bool

        public var description: String { "role \(role): \(message)" }
    }

    /// Problems with `roles` as seen by the session user of `connection`.
    public static func problems(with roles: Set<String>, on connection: LibpqConnection) throws(LibpqError) -> [Problem] {
        var problems: [Problem] = []
        for role in roles.sorted() {
            let result = try connection.execute("""
                SELECT session_user AS me,
                  (SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = $1) AS bypasses,
                  CASE WHEN EXISTS (SELECT FROM pg_roles WHERE rolname = $1) THEN pg_has_role(session_user, $1, 'MEMBER') END AS may_set
                """, parameters: [role])
            guard let row = result.rows.first, let me = row[0] else { continue }
            switch row[2] {
            case nil:
                problems.append(Problem(role: role, message: "no such role in the database: CREATE ROLE \(role) NOLOGIN, or fix the configuration", isError: true))
            case "f":
                problems.append(Problem(
                    role: role, message: "\(me) may not SET ROLE to it: run GRANT \(role) TO \(me)", isError: true
                ))
            default:
                if row[1] == "t" {
                    problems.append(Problem(role: role, message: "it is a superuser or has BYPASSRLS: its subscribers see every row", isError: false))
                }
            }
        }
        return problems
    }
}
