/// Whose row-level security decides what a subscriber sees: a database role
/// and the JWT claims a policy reads, as PostgREST and Supabase evaluate
/// them (`SET LOCAL ROLE`, `request.jwt.claims`).
///
/// Subscribers with equal identities form one cohort, checked once per
/// batch however many of them there are.
public struct RowSecurityIdentity: Sendable, Hashable, CustomStringConvertible {
    /// Claims that differ between two tokens of one user (a refresh, another
    /// device) and that policies do not decide on: left out, so that one
    /// user's devices are one cohort. pgherald checks `exp` and `nbf` itself.
    public static let perTokenClaims: Set<String> = ["exp", "iat", "nbf", "jti", "session_id"]

    /// The role to `SET LOCAL ROLE` to.
    public var role: String
    /// The claims, top-level keys sorted, without ``perTokenClaims``.
    public let claims: JSONObject

    public init(role: String, claims: JSONObject = [:]) {
        self.role = role
        var canonical = JSONObject()
        for (key, value) in claims.sorted(by: { $0.key < $1.key }) where !Self.perTokenClaims.contains(key) {
            canonical[key] = value
        }
        self.claims = canonical
    }

    /// The claims as `request.jwt.claims` holds them.
    public var claimsText: String { JSONValue.object(claims).jsonText }

    /// `role R, sub S` for logs: never the whole claims, which may be personal.
    public var description: String {
        "role \(role)\(claims["sub"]?.stringValue.map { ", sub \($0.prefix(64))" } ?? "")"
    }
}
