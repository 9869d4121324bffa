/// Whose row-level security decides what a subscriber sees: a database role
/// and the JWT claims a policy reads, as PostgREST and Supabase evaluate
/// them (`SET LOCAL ROLE`, `request.jwt.claims`).
///
/// Subscribers with equal identities form one cohort, checked once per
/// batch however many of them there are.
public struct RowSecurityIdentity: Sendable, Hashable, CustomStringConvertible {
    /// Claims left out by default: the token's dates, which differ between
    /// two tokens of one user (a refresh) and which pgherald checks itself.
    /// Every other claim is kept, since a policy may read it (`session_id`
    /// for revoked sessions or rows per device, `jti`, `aal`); an operator
    /// whose policies read none of some others lists them
    /// (`realtime.jwt.ignored_claims`), so that tokens differing only in
    /// them share one check.
    public static let dateClaims: Set<String> = ["exp", "iat", "nbf"]

    /// The role to `SET LOCAL ROLE` to.
    public var role: String
    /// The claims, top-level keys sorted, without the ignored ones.
    public let claims: JSONObject
    /// The claims as `request.jwt.claims` holds them.
    public let claimsText: String

    /// - Parameter ignored: claims left out of the identity and of
    ///   `request.jwt.claims`. Default: ``dateClaims``.
    public init(role: String, claims: JSONObject = [:], ignoring ignored: Set<String> = dateClaims) {
        self.role = role
        var canonical = JSONObject()
        for (key, value) in claims.sorted(by: { $0.key < $1.key }) where !ignored.contains(key) {
            canonical[key] = value
        }
        self.claims = canonical
        claimsText = JSONValue.object(canonical).jsonText
    }

    // Byte for byte, as PostgreSQL compares the role and the claims a policy reads. Swift's String
    // equality holds for text that is canonically equivalent, such as `zoë` written with one
    // character or with `e` and a combining diaeresis, which are two users to PostgreSQL: one
    // cohort for both judged every row with the claims of the first.
    public static func == (lhs: RowSecurityIdentity, rhs: RowSecurityIdentity) -> Bool {
        lhs.role.hasSameBytes(as: rhs.role) && lhs.claimsText.hasSameBytes(as: rhs.claimsText)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(exactly: role)
        hasher.combine(exactly: claimsText)
    }

    /// `role R, sub S` for logs: never the whole claims, which may be personal.
    public var description: String {
        "role \(role)\(claims["sub"]?.stringValue.map { ", sub \($0.prefix(64))" } ?? "")"
    }
}
