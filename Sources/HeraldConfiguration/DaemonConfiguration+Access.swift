#if canImport(Glibc)
import Glibc
import Herald
import HeraldSettings
import HeraldSupabase
#endif

extension DaemonConfiguration {
    /// Keys a rule may have; anything else under `access.NAME` is refused.
    static let accessKeys = ["user", "group", "schemas", "tables", "ops", "where", "topics", "queries", "rls", "role", "claims"]

    /// The `access:` section: one rule per name. Nil without the section.
    static func accessPolicy(_ settings: SettingsReader) throws(ConfigurationError) -> AccessPolicy? {
        let sections = settings.fileSections(under: "access")
        guard !sections.isEmpty || settings.fileContains("access") else { return nil }
        if sections.isEmpty { settings.record("access", "(no rules: only root and the daemon's own user see events)") }
        var rules: [AccessPolicy.Rule] = []
        for (name, _) in sections {
            rules.append(try accessRule(named: name, settings))
        }
        return AccessPolicy(rules: rules, daemonUserID: getuid())
    }

    private static func accessRule(named name: String, _ settings: SettingsReader) throws(ConfigurationError) -> AccessPolicy.Rule {
        let prefix = "access.\(name)"
        for key in settings.fileKeys(under: prefix) where !accessKeys.contains(where: { key == "\(prefix).\($0)" }) {
            throw settings.fail(key, "not an access rule setting (known: \(accessKeys.joined(separator: ", ")))")
        }
        let principal: AccessPolicy.Rule.Principal
        switch (settings.string("\(prefix).user"), settings.string("\(prefix).group")) {
        case (let user?, nil):
            guard let (id, known) = userID(user) else { throw settings.fail("\(prefix).user", "no user named '\(user.prefix(64))'") }
            principal = .user(id: id, name: known)
        case (nil, let group?):
            guard let (id, known) = groupID(group) else { throw settings.fail("\(prefix).group", "no group named '\(group.prefix(64))'") }
            principal = .group(id: id, name: known)
        case (nil, nil):
            throw settings.fail("\(prefix).user", "every rule names a user or a group (by name or id)")
        case (_?, _?):
            throw settings.fail("\(prefix).group", "a rule names a user or a group, not both: write two rules")
        }

        return AccessPolicy.Rule(name: name, principal: principal, grant: try settings.grant(under: prefix))
    }

    /// A user by name or id; the name when the user has one.
    private static func userID(_ text: String) -> (UInt32, String?)? {
        if let id = UInt32(text) { return (id, getpwuid(id).map { String(cString: $0.pointee.pw_name) }) }
        return getpwnam(text).map { ($0.pointee.pw_uid, text) }
    }

    private static func groupID(_ text: String) -> (UInt32, String?)? {
        if let id = UInt32(text) { return (id, getgrgid(id).map { String(cString: $0.pointee.gr_name) }) }
        return getgrnam(text).map { ($0.pointee.gr_gid, text) }
    }
}

extension DaemonConfiguration {
    /// The database roles `rls: true` checks as: of access rules, realtime
    /// keys, and the JWT roles whose tokens' own role is the database role.
    public var rowSecurityRoles: Set<String> {
        var roles = Set(access?.rules.compactMap(\.grant.rowSecurity?.role) ?? [])
        if let realtime = self[RealtimeEndpoint.self] {
            roles.formUnion(realtime.credentials.keys.compactMap(\.grant.rowSecurity?.role))
            roles.formUnion(realtime.credentials.tokens?.roles.values.compactMap(\.rowSecurity?.role) ?? [])
        }
        return roles
    }
}
