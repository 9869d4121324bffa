import Foundation
import Herald
import HeraldHTTP
import HeraldPostgres
import HeraldRealtime
public import HeraldSettings

extension RealtimeConfiguration {
    /// Keys a `realtime.keys.NAME` entry may have.
    /// `queries` grants live queries over the network listener (`http.listen`).
    static let keySettings = ["key", "key_file", "schemas", "tables", "ops", "where", "topics", "queries", "rls", "role", "claims"]
    /// Keys a `realtime.jwt.roles.ROLE` entry may have.
    static let roleSettings = ["schemas", "tables", "ops", "where", "topics", "queries", "rls", "role", "claims"]

    /// What a client message may hold beside a broadcast's payload: the topic, a token, presence, bindings.
    static let messageEnvelopeBytes = 65_536

    /// The `realtime:` section; its defaults without one (the Unix socket only, no keys).
    public init(settings: SettingsReader) throws(ConfigurationError) {
        let listen = settings.string("realtime.listen")
        if let listen, ListenAddress(listen) == nil {
            throw settings.fail("realtime.listen", "'\(listen)' is not HOST:PORT, such as 127.0.0.1:4000 or [::1]:4000")
        }
        let window = try settings.value("realtime.resume_window", default: "2m" as DurationOrOff, expected: "a duration such as 2m, or 0s to turn it off")
        let buffer = try settings.int("realtime.channel_buffer", default: 4096, in: PostgresListener.maximumBatch...Int.max)
        let maximumChannels = try settings.int("realtime.max_channels", default: 10_000, in: 1...Int.max)
        let broadcastBytes = try settings.int("realtime.broadcast.max_bytes", default: 65_536, in: 1...(1 << 20))
        let broadcastRate = try settings.int("realtime.broadcast.max_per_second", default: 100, in: 1...100_000)
        // At least two of the largest broadcasts, so that any one of them can wait for a socket, beside the room
        // kept for the largest message the socket's client may be sending.
        let queuedMinimum = max(2 << 20, 2 * broadcastBytes + (broadcastBytes + Self.messageEnvelopeBytes))
        let queuedBytes = try settings.int("realtime.max_queued_bytes", default: 8 << 20, in: queuedMinimum...Int.max)
        let defaults = ConsumerLedger.Limits()
        let consumerLimits = ConsumerLedger.Limits(
            connectionsPerKey: try settings.int("realtime.max_connections_per_key", default: defaults.connectionsPerKey, in: 0...Int.max),
            connectionsPerUser: try settings.int("realtime.max_connections_per_user", default: defaults.connectionsPerUser, in: 0...Int.max),
            channelsPerKey: try settings.int("realtime.max_channels_per_key", default: defaults.channelsPerKey, in: 0...Int.max),
            channelsPerUser: try settings.int("realtime.max_channels_per_user", default: defaults.channelsPerUser, in: 0...Int.max),
            conditionsPerKey: try settings.int("realtime.max_conditions_per_key", default: defaults.conditionsPerKey, in: 0...Int.max),
            conditionsPerUser: try settings.int("realtime.max_conditions_per_user", default: defaults.conditionsPerUser, in: 0...Int.max)
        )

        var keys: [RealtimeCredentials.Key] = []
        for (name, _) in settings.fileSections(under: "realtime.keys") {
            keys.append(try Self.key(named: name, settings))
        }
        let tokens = try Self.tokens(settings)
        let credentials = RealtimeCredentials(keys: keys, tokens: tokens)
        if let listen, credentials.isEmpty {
            throw settings.fail("realtime.listen", "TCP clients must present a key, and none is configured: add realtime.keys or realtime.jwt (listen: \(listen))")
        }
        self.init(
            listen: listen, credentials: credentials, mailboxCapacity: buffer,
            // A fragmented message is held whole until its last frame: no larger than the largest broadcast with its envelope,
            // so that 10,000 connections each holding an unfinished one do not hold 10 GiB.
            maximumMessageSize: broadcastBytes + Self.messageEnvelopeBytes, maximumChannels: maximumChannels, resumeWindow: window.duration,
            broadcastMaximumBytes: broadcastBytes, broadcastMaximumPerSecond: broadcastRate, consumerLimits: consumerLimits,
            addressLimit: try AddressLimit(under: "realtime", settings), maximumQueuedBytes: queuedBytes
        )
    }

    private static func key(named name: String, _ settings: SettingsReader) throws(ConfigurationError) -> RealtimeCredentials.Key {
        let prefix = "realtime.keys.\(name)"
        guard name.lowercased() != "console" else {
            throw settings.fail(prefix, "console names the operator's key (console.key) in logs and refusals: give this realtime key another name")
        }
        for key in settings.fileKeys(under: prefix) where !keySettings.contains(where: { key == "\(prefix).\($0)" }) {
            throw settings.fail(key, "not a realtime key setting (known: \(keySettings.joined(separator: ", ")))")
        }
        guard let secret = try settings.keySecret(under: prefix, minimumLength: 16, what: "a realtime key") else {
            throw settings.fail("\(prefix).key_file", "every realtime key needs key_file (or key): the apikey its clients present")
        }
        return RealtimeCredentials.Key(name: name, secret: secret, grant: try settings.grant(under: prefix))
    }

    /// `realtime.jwt`: the HS256 secret, and one grant per `role` claim.
    private static func tokens(_ settings: SettingsReader) throws(ConfigurationError) -> RealtimeCredentials.Tokens? {
        let roles = settings.fileSections(under: "realtime.jwt.roles")
        guard let reference = settings.string("realtime.jwt.secret_file", recorded: false) else {
            guard roles.isEmpty else { throw settings.fail("realtime.jwt.secret_file", "realtime.jwt.roles needs the secret the tokens are signed with") }
            return nil
        }
        let (path, lines) = try settings.secretFile(reference, key: "realtime.jwt.secret_file")
        guard let secret = lines.first?.trimmingCharacters(in: .whitespaces), secret.utf8.count >= 32 else {
            throw settings.fail("realtime.jwt.secret_file", "\(path) must hold the HS256 secret on its first line, at least 32 characters")
        }
        settings.record("realtime.jwt.secret_file", "\(path) (read)")
        guard !roles.isEmpty else {
            throw settings.fail("realtime.jwt.roles", "name the role claims that may subscribe, such as roles: {anon: {tables: [public.todos]}}")
        }
        var grants: [String: AccessGrant] = [:]
        for (role, _) in roles {
            let prefix = "realtime.jwt.roles.\(role)"
            for key in settings.fileKeys(under: prefix) where !roleSettings.contains(where: { key == "\(prefix).\($0)" }) {
                throw settings.fail(key, "not a role setting (known: \(roleSettings.joined(separator: ", ")))")
            }
            _ = settings.fileContains(prefix)
            grants[role] = try settings.grant(under: prefix, tokenRole: role)
        }
        let ignored = Set(settings.list("realtime.jwt.ignored_claims") ?? RowSecurityIdentity.dateClaims.sorted())
        if ignored.contains("role") {
            throw settings.fail("realtime.jwt.ignored_claims", "role picks the token's grant and the database role; it cannot be ignored")
        }
        settings.record("realtime.jwt.ignored_claims", ignored.sorted().joined(separator: ", "))
        return RealtimeCredentials.Tokens(secret: Array(secret.utf8), roles: grants, ignoredClaims: ignored)
    }
}
