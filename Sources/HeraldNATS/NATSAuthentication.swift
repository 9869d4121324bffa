/// How a client proves who it is in `CONNECT`.
public enum NATSAuthentication: Sendable, Equatable {
    case none
    case password(user: String, password: String)
    case token(String)
    /// The public key, and the nonce signed with its seed.
    case nkey(NATSNKey)
    /// A user JWT issued by an account (decentralised auth, as `nsc` sets
    /// up), and the nonce signed with the user's seed.
    case credentials(jwt: String, key: NATSNKey)

    /// Reads a `.creds` file as `nsc generate creds` writes it: the user's
    /// JWT, then the user's seed, each between lines of dashes.
    public init(credentialsFile contents: String) throws(NATSError) {
        var jwt: String?
        var seed: String?
        var opened: String?
        for line in contents.split(whereSeparator: \.isNewline).map({ $0.trimmingCharacters(in: .whitespaces) }) where !line.isEmpty {
            if line.hasPrefix("---"), line.hasSuffix("---") {
                opened = line.contains("BEGIN") ? line : nil
                continue
            }
            guard let marker = opened else { continue }
            if marker.contains("JWT"), jwt == nil { jwt = line }
            if marker.contains("SEED"), seed == nil { seed = line }
            opened = nil
        }
        guard let jwt else { throw NATSError(.refused, "the credentials file holds no user JWT (-----BEGIN NATS USER JWT-----)") }
        guard let seed else { throw NATSError(.refused, "the credentials file holds no user seed (-----BEGIN USER NKEY SEED-----)") }
        guard jwt.split(separator: ".", omittingEmptySubsequences: false).count == 3 else {
            throw NATSError(.refused, "the credentials file's JWT is not header.claims.signature")
        }
        self = .credentials(jwt: jwt, key: try NATSNKey(seed: seed))
    }

    /// Fills the `CONNECT` fields, signing the `INFO`'s nonce where a key needs it.
    func apply(to options: inout NATSConnectOptions, nonce: String?) throws(NATSError) {
        switch self {
        case .none:
            break
        case .password(let user, let password):
            options.user = user
            options.password = password
        case .token(let token):
            options.token = token
        case .nkey(let key):
            options.nkey = key.publicKey
            options.signature = try Self.sign(nonce, with: key)
        case .credentials(let jwt, let key):
            options.jwt = jwt
            options.signature = try Self.sign(nonce, with: key)
        }
    }

    private static func sign(_ nonce: String?, with key: NATSNKey) throws(NATSError) -> String {
        guard let nonce else { throw NATSError(.refused, "the server sent no nonce to sign: it is not set up for NKey or JWT users") }
        do {
            return try key.sign(nonce: nonce)
        } catch {
            throw NATSError(.refused, "cannot sign the server's nonce: \(error)")
        }
    }
}
