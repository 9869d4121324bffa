public import Herald
import Crypto
import Foundation

/// Who may use the realtime endpoint, and what each caller may see: the
/// config file's `realtime.keys` and `realtime.jwt`.
///
/// A presented `apikey` or `access_token` is either one of the static keys
/// or an HS256 JWT signed with the configured secret, whose `role` claim
/// picks the grant.
public struct RealtimeCredentials: Sendable, Hashable {
    /// A static key and what it grants.
    public struct Key: Sendable, Hashable {
        /// The key's name in the config file, for logs.
        public var name: String
        /// SHA-256 of the key, so comparisons take the same time whatever the input.
        let digest: SHA256.Digest
        public var grant: AccessGrant

        public init(name: String, secret: String, grant: AccessGrant) {
            self.name = name
            digest = SHA256.hash(data: Data(secret.utf8))
            self.grant = grant
        }

        /// Whether `other` has the same secret.
        public func sharesSecret(with other: Key) -> Bool { digest == other.digest }

        /// Whether `presented` is this key, by its digest: by the secret alone, never by a name.
        public func admits(_ presented: String) -> Bool {
            SHA256.hash(data: Data(presented.utf8)) == digest
        }
    }

    /// HS256 tokens signed with one secret, as Supabase issues them.
    public struct Tokens: Sendable, Hashable {
        let secret: SymmetricKey
        /// What each `role` claim may see; a token whose role is missing here is refused.
        public var roles: [String: AccessGrant]
        /// Claims that no policy reads (`realtime.jwt.ignored_claims`): left
        /// out of a row-security identity, so that tokens differing only in
        /// them share one cohort. Default: ``RowSecurityIdentity/dateClaims``.
        public var ignoredClaims: Set<String>

        public init(secret: [UInt8], roles: [String: AccessGrant], ignoredClaims: Set<String> = RowSecurityIdentity.dateClaims) {
            self.secret = SymmetricKey(data: secret)
            self.roles = roles
            self.ignoredClaims = ignoredClaims
        }

        public static func == (lhs: Tokens, rhs: Tokens) -> Bool {
            lhs.roles == rhs.roles && lhs.ignoredClaims == rhs.ignoredClaims && lhs.secret == rhs.secret
        }

        public func hash(into hasher: inout Hasher) {
            hasher.combine(roles)
            hasher.combine(ignoredClaims)
        }
    }

    public var keys: [Key]
    public var tokens: Tokens?

    public init(keys: [Key] = [], tokens: Tokens? = nil) {
        self.keys = keys
        self.tokens = tokens
    }

    /// No keys and no token secret: only Unix-socket peers, under the access rules, may connect.
    public var isEmpty: Bool { keys.isEmpty && tokens == nil }

    /// The caller `presented` stands for, or why it is refused.
    /// - Parameter now: seconds since 1970, for `exp` and `nbf`.
    public func identify(_ presented: String, now: Double) throws(RealtimeAuthError) -> RealtimeIdentity {
        guard !presented.isEmpty else { throw RealtimeAuthError(.missing, "no apikey or access_token") }
        let digest = SHA256.hash(data: Data(presented.utf8))
        // Every key is compared, so the time taken does not tell which one nearly matched.
        var found: Key?
        for key in keys where key.digest == digest { found = key }
        if let found {
            return RealtimeIdentity(name: "key \(found.name)", scope: Self.scope(found.grant, rule: found.name), expiresAt: nil)
        }
        guard let tokens, presented.utf8.count(where: { $0 == UInt8(ascii: ".") }) == 2 else {
            // Name only what this daemon takes, so that a client is not sent looking for keys that do not exist.
            switch (keys.isEmpty, tokens == nil) {
            case (true, false): throw RealtimeAuthError(.malformedToken, "the token is not a JWT (three base64url parts, signed with realtime.jwt's secret)")
            case (false, false): throw RealtimeAuthError(.unknownKey, "the key is neither one of realtime.keys nor a JWT (three base64url parts)")
            default: throw RealtimeAuthError(.unknownKey, "the key is not one of realtime.keys")
            }
        }
        return try tokens.identify(presented, now: now)
    }

    static func scope(_ grant: AccessGrant, rule: String) -> AccessScope {
        grant.isUnrestricted ? .everything : .grants([grant], rules: [rule])
    }
}

/// An authenticated realtime caller.
public struct RealtimeIdentity: Sendable, Hashable {
    /// `key NAME` or `token (role R, sub S)`, for logs.
    public var name: String
    public var scope: AccessScope
    /// A token's `exp`, in seconds since 1970: the channel closes then.
    public var expiresAt: Double?
    /// Whom its connections and channels are counted against.
    public var consumer: RealtimeConsumer

    public init(name: String, scope: AccessScope, expiresAt: Double?, consumer: RealtimeConsumer? = nil) {
        self.name = name
        self.scope = scope
        self.expiresAt = expiresAt
        self.consumer = consumer ?? .shared(name)
    }

    /// Seconds from `now` (the clock's, by default) until a token's `exp` (negative once it passed), or nil when `exp`
    /// lies past the daemon's lifetime: a signed `exp` may be any number, and a timer that
    /// far out would trap converting to nanoseconds, so such a token is one that does not expire.
    public static func secondsUntilExpiry(_ expiresAt: Double, now: Double? = nil) -> Double? {
        let remaining = expiresAt - (now ?? Date().timeIntervalSince1970)
        return remaining < longestExpiryTimer ? remaining : nil
    }

    /// Ten years, in seconds.
    static let longestExpiryTimer: Double = 10 * 366 * 86_400
}

/// Why a key or token was refused.
public struct RealtimeAuthError: Error, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable {
        case missing = "missing_key"
        case unknownKey = "unknown_key"
        case malformedToken = "malformed_token"
        case badSignature = "bad_signature"
        case expired = "token_expired"
        case notYetValid = "token_not_yet_valid"
        case roleWithoutGrant = "role_without_grant"
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

extension RealtimeCredentials.Tokens {
    func identify(_ token: String, now: Double) throws(RealtimeAuthError) -> RealtimeIdentity {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = Self.base64URL(parts[0]), let claimBytes = Self.base64URL(parts[1]),
              let signature = Self.base64URL(parts[2]) else {
            throw RealtimeAuthError(.malformedToken, "the token is not a JWT (three base64url parts)")
        }
        guard case .object(let headerObject)? = try? JSONParser.parse(Array(header)) else {
            throw RealtimeAuthError(.malformedToken, "the token's header is not a JSON object")
        }
        // Only HS256: accepting the header's word for another algorithm is the classic JWT hole.
        guard headerObject["alg"]?.stringValue == "HS256" else {
            throw RealtimeAuthError(.malformedToken, "the token must be signed with HS256")
        }
        // RFC 7515: a header's `crit` names extensions the token needs understood, and pgherald understands none.
        guard headerObject["crit"] == nil else {
            throw RealtimeAuthError(.malformedToken, "the token's header asks for extensions (crit) that pgherald does not understand")
        }
        let signed = Data(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: signed, using: secret) else {
            throw RealtimeAuthError(.badSignature, "the token's signature does not match realtime.jwt's secret")
        }
        guard case .object(let claims)? = try? JSONParser.parse(Array(claimBytes)) else {
            throw RealtimeAuthError(.malformedToken, "the token's claims are not a JSON object")
        }
        // With a name twice, the grant would read one `role` and the policies (request.jwt.claims) perhaps the other.
        guard Set(claims.keys).count == claims.count else {
            throw RealtimeAuthError(.malformedToken, "the token's claims name a claim twice")
        }
        let expiresAt = try Self.seconds(claims, "exp")
        if let expiresAt, expiresAt <= now { throw RealtimeAuthError(.expired, "the token has expired") }
        _ = try Self.seconds(claims, "iat")
        if let notBefore = try Self.seconds(claims, "nbf"), notBefore > now {
            throw RealtimeAuthError(.notYetValid, "the token is not valid yet (nbf)")
        }
        let role = claims["role"]?.stringValue ?? ""
        guard var grant = roles[role] else {
            throw RealtimeAuthError(.roleWithoutGrant, "role '\(role.prefix(40))' has no grant under realtime.jwt.roles")
        }
        // `rls: true` on the role: its policies see this token's own claims.
        if grant.rowSecurity != nil { grant.rowSecurity = RowSecurityIdentity(role: role, claims: claims, ignoring: ignoredClaims) }
        let subject = claims["sub"]?.stringValue.map { String($0.prefix(64)) }
        return RealtimeIdentity(
            name: "token (role \(role)\(subject.map { ", sub \($0)" } ?? ""))", scope: RealtimeCredentials.scope(grant, rule: "jwt role \(role)"),
            expiresAt: expiresAt, consumer: subject.map { .user(role: role, subject: $0) } ?? .shared("role \(role)")
        )
    }

    /// A token of these claims signed with this secret, as Supabase signs its
    /// anon and user tokens: for minting keys for clients, and for tests.
    public func sign(claims: JSONObject) -> String {
        let signed = Self.base64URL(Data(#"{"alg":"HS256","typ":"JWT"}"#.utf8)) + "." + Self.base64URL(Data(claims.jsonText.utf8))
        let signature = HMAC<SHA256>.authenticationCode(for: Data(signed.utf8), using: secret)
        return signed + "." + Self.base64URL(Data(signature))
    }

    private static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// The date claim `name` in seconds since 1970, nil when absent. RFC 7519
    /// makes it a NumericDate: anything else (a string, null, an array, a
    /// number too large for a date) refuses the token, never skips the check.
    private static func seconds(_ claims: JSONObject, _ name: String) throws(RealtimeAuthError) -> Double? {
        guard let value = claims[name] else { return nil }
        guard case .number(let number) = value, let seconds = number.doubleValue, seconds.isFinite else {
            throw RealtimeAuthError(.malformedToken, "the token's \(name) claim is not a number of seconds (RFC 7519 NumericDate)")
        }
        return seconds
    }

    private static func base64URL(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }
}
