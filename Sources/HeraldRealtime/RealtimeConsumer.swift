/// Whom a connection or a channel is counted against, so that no one of them takes the daemon's
/// global limits: a credential many clients may share, or one user.
public enum RealtimeConsumer: Hashable, Sendable, CustomStringConvertible {
    /// A key of `realtime.keys`, or a token without `sub` such as Supabase's anon key: shared by
    /// whoever holds it. Named `key NAME` or `role ROLE`.
    case shared(String)
    /// A token's subject: one user, on however many devices.
    case user(role: String, subject: String)

    /// For logs, `/stats` and `/metrics`: never the key or token itself.
    public var description: String {
        switch self {
        case .shared(let name): name
        case .user(let role, let subject): "role \(role), sub \(subject)"
        }
    }

    /// Whether this is one user rather than a shared credential; picks the limits that apply.
    public var isUser: Bool {
        if case .user = self { return true }
        return false
    }
}
