/// The fields of the server's `INFO` that a publishing client needs.
public struct NATSServerInfo: Sendable, Equatable, Decodable {
    public var serverID: String
    public var version: String
    /// Whether the server takes `HPUB` (NATS 2.2 and later).
    public var headers: Bool
    /// The largest payload the server accepts, in bytes, headers included.
    public var maximumPayload: Int
    /// nats-server's `max_payload` when the INFO does not say: 1 MiB.
    public static let defaultMaximumPayload = 1 << 20
    public var jetStream: Bool
    public var authenticationRequired: Bool
    public var tlsRequired: Bool
    /// Other servers of the cluster a client may reconnect to.
    public var connectURLs: [String]
    /// What an NKey or JWT user signs, when the server has such users.
    public var nonce: String?

    enum CodingKeys: String, CodingKey {
        case serverID = "server_id", version, headers, maximumPayload = "max_payload", jetStream = "jetstream"
        case authenticationRequired = "auth_required", tlsRequired = "tls_required", connectURLs = "connect_urls", nonce
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        serverID = try container.decode(String.self, forKey: .serverID)
        version = try container.decodeIfPresent(String.self, forKey: .version) ?? "?"
        headers = try container.decodeIfPresent(Bool.self, forKey: .headers) ?? false
        maximumPayload = try container.decodeIfPresent(Int.self, forKey: .maximumPayload) ?? Self.defaultMaximumPayload
        jetStream = try container.decodeIfPresent(Bool.self, forKey: .jetStream) ?? false
        authenticationRequired = try container.decodeIfPresent(Bool.self, forKey: .authenticationRequired) ?? false
        tlsRequired = try container.decodeIfPresent(Bool.self, forKey: .tlsRequired) ?? false
        connectURLs = try container.decodeIfPresent([String].self, forKey: .connectURLs) ?? []
        nonce = try container.decodeIfPresent(String.self, forKey: .nonce)
    }
}
