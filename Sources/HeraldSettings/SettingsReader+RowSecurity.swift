public import Herald

extension SettingsReader {
    /// `rls`, `role` and `claims` under `prefix`: the identity whose
    /// row-level security decides what the rule's or key's subscribers see.
    ///
    /// - Parameter tokenRole: for `realtime.jwt.roles.ROLE`, the role claim:
    ///   the identity is then each token's own role and claims, and `role`
    ///   and `claims` may not be written.
    public func rowSecurity(under prefix: String, tokenRole: String? = nil) throws(ConfigurationError) -> RowSecurityIdentity? {
        guard try bool("\(prefix).rls", default: false) else {
            for key in ["role", "claims"] where string("\(prefix).\(key)", recorded: false) != nil {
                throw fail("\(prefix).\(key)", "\(key) is the identity row-level security checks as: it needs rls: true beside it")
            }
            return nil
        }
        if let tokenRole {
            for key in ["role", "claims"] where string("\(prefix).\(key)", recorded: false) != nil {
                throw fail("\(prefix).\(key)", "a token's own role and claims are what its policies see: remove \(key) here")
            }
            return RowSecurityIdentity(role: tokenRole)
        }
        guard let role = string("\(prefix).role"), !role.isEmpty else {
            throw fail("\(prefix).role", "rls: true needs the database role to check as, such as role: authenticated")
        }
        guard let text = string("\(prefix).claims") else { return RowSecurityIdentity(role: role) }
        guard case .object(let claims)? = try? JSONParser.parse(Array(text.utf8)) else {
            throw fail("\(prefix).claims", "claims is a JSON object, such as '{\"sub\": \"4f1c…\"}'")
        }
        return RowSecurityIdentity(role: role, claims: claims)
    }
}
