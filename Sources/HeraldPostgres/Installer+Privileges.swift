extension Installer {
    /// Who may run `install` and `uninstall`, for a refusal that names no role.
    static let installPrivilegeHint = "pgherald install must be run by the database's owner (it creates the pgherald schema) "
        + "who also owns the watched tables (it adds their triggers), or by a superuser; connect as that role with --db \"user=...\""
    static let uninstallPrivilegeHint = "pgherald uninstall must be run by the role that installed pgherald (the owner of the "
        + "pgherald schema and of the watched tables), or by a superuser; connect as that role with --db \"user=...\""

    /// Runs `body`, adding `hint` to a refusal for want of privileges (SQLSTATE 42501: "permission denied", "must be owner").
    static func explainingPrivileges<Result>(
        _ hint: String, _ body: () throws(LibpqError) -> Result
    ) throws(LibpqError) -> Result {
        do {
            return try body()
        } catch where error.sqlState == "42501" {
            var explained = error
            explained.message += ". \(hint)"
            throw explained
        }
    }
}
