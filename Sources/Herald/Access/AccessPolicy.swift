/// Who may see what on the socket: the `access:` section of the
/// configuration file, as rules that each grant one user or group.
///
/// A peer's scope is the union of the grants of every rule naming its user
/// or one of its groups. Root and the daemon's own user see everything.
/// Without rules (`nil` policy) everyone the socket lets in sees everything.
public struct AccessPolicy: Sendable, Hashable {
    /// One rule of the section.
    public struct Rule: Sendable, Hashable {
        /// Whom a rule grants.
        public enum Principal: Sendable, Hashable, CustomStringConvertible {
            case user(id: UInt32, name: String?)
            case group(id: UInt32, name: String?)

            public var description: String {
                switch self {
                case .user(let id, let name): "user \(name.map { "\($0) (\(id))" } ?? String(id))"
                case .group(let id, let name): "group \(name.map { "\($0) (\(id))" } ?? String(id))"
                }
            }
        }

        /// The rule's name in the file, for logs and errors.
        public var name: String
        public var principal: Principal
        public var grant: AccessGrant

        public init(name: String, principal: Principal, grant: AccessGrant) {
            self.name = name
            self.principal = principal
            self.grant = grant
        }

        public func applies(to peer: PeerIdentity) -> Bool {
            switch principal {
            case .user(let id, _): peer.userID == id
            case .group(let id, _): peer.groupIDs.contains(id)
            }
        }
    }

    public var rules: [Rule]
    /// The daemon's own user id: it sees everything, as root does.
    public var daemonUserID: UInt32

    public init(rules: [Rule], daemonUserID: UInt32) {
        self.rules = rules
        self.daemonUserID = daemonUserID
    }

    /// What `peer` may see.
    public func scope(for peer: PeerIdentity) -> AccessScope {
        if peer.userID == 0 || peer.userID == daemonUserID { return .everything }
        let applying = rules.filter { $0.applies(to: peer) }
        let identities = Set(applying.compactMap(\.grant.rowSecurity))
        // Row-level security narrows everything the peer is granted: no other rule's grant goes round it.
        if identities.isEmpty, applying.contains(where: \.grant.isUnrestricted) { return .everything }
        // Two identities would make the peer two users at once: it is refused, and the rules must be fixed.
        if identities.count > 1 { return .grants([], rules: applying.map(\.name)) }
        let identity = identities.first
        return .grants(applying.map { rule in
            var grant = rule.grant
            grant.rowSecurity = identity
            return grant
        }, rules: applying.map(\.name))
    }
}

/// The identity of a process on the other end of the socket, as the kernel
/// vouches for it (`SO_PEERCRED`), with the groups of its user.
public struct PeerIdentity: Sendable, Hashable, CustomStringConvertible {
    public var processID: Int32
    public var userID: UInt32
    /// The process's group, then its user's other groups.
    public var groupIDs: [UInt32]
    /// The user's name, when the user has one.
    public var userName: String?

    public init(processID: Int32, userID: UInt32, groupIDs: [UInt32], userName: String? = nil) {
        self.processID = processID
        self.userID = userID
        self.groupIDs = groupIDs
        self.userName = userName
    }

    public var description: String {
        "uid \(userID)\(userName.map { " (\($0))" } ?? ""), pid \(processID)"
    }
}

/// What a peer may see.
public enum AccessScope: Sendable, Hashable {
    case everything
    /// The union of these grants, from the named rules; none means nothing.
    case grants([AccessGrant], rules: [String])

    /// Whose row-level security decides what passes, if the grants say so.
    public var rowSecurity: RowSecurityIdentity? {
        guard case .grants(let grants, _) = self else { return nil }
        return grants.lazy.compactMap(\.rowSecurity).first
    }

    /// Whether some events of `table` may be seen.
    public func covers(_ table: TableName) -> Bool {
        switch self {
        case .everything: true
        case .grants(let grants, _): grants.contains { $0.covers(table) }
        }
    }

    /// Whether the private topic `name` may be joined and sent to.
    public func covers(topic name: String) -> Bool {
        switch self {
        case .everything: true
        case .grants(let grants, _): grants.contains { $0.covers(topic: name) }
        }
    }

    /// Why the live query `name`, which reads `tables`, may not be subscribed to; nil when it may.
    /// - Parameter runsAsSubscriber: the query runs with the subscriber's
    ///   row-level security: under it, its policies decide the rows, and no
    ///   table-wide grant is needed.
    public func refusal(ofQuery name: String, reading tables: [TableName], runsAsSubscriber: Bool = false) -> String? {
        guard case .grants(let grants, _) = self else { return nil }
        guard grants.contains(where: { $0.covers(query: name) }) else { return "the query \(name) is not granted" }
        if runsAsSubscriber, rowSecurity != nil { return nil }
        for table in tables where !grants.contains(where: { $0.coversWholly(table) }) {
            return "the query \(name) reads \(table), whose rows are not all granted"
        }
        return nil
    }
}
