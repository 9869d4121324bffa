import Foundation
public import Herald
public import HeraldNATS
public import HeraldOutput
public import HeraldSettings

extension NATSOutput: Output {
    /// Section `nats`; off without `nats.stream`.
    public static let section = "nats"
    public static let reloadableKeys: [String] = []

    public static func configuration(from settings: SettingsReader) throws(ConfigurationError) -> NATSOutputConfiguration? {
        var servers: [NATSOutputConfiguration.Server] = []
        let urls = settings.list("nats.servers") ?? ["nats://127.0.0.1:4222"]
        settings.record("nats.servers", urls.joined(separator: ", "))
        for url in urls {
            guard let components = URLComponents(string: url), components.scheme == "nats", let host = components.host, !host.isEmpty,
                  components.path.isEmpty || components.path == "/" else {
                throw settings.fail("nats.servers", "'\(url.prefix(80))' is not a nats://host:port URL")
            }
            guard components.user == nil else {
                throw settings.fail("nats.servers", "keep credentials out of the URL: use nats.user with nats.password_file, nats.token_file, nats.nkey_seed_file or nats.credentials_file")
            }
            servers.append(.init(host: host, port: components.port ?? 4222))
        }
        let template = settings.string("nats.subject", default: "pgherald.{schema}.{table}.{op}")
        let subject: NATSSubjectTemplate
        do {
            subject = try NATSSubjectTemplate(template)
        } catch {
            throw settings.fail("nats.subject", error.description)
        }
        let createStream = try settings.bool("nats.create_stream", default: false)
        let window = try settings.value("nats.duplicate_window", default: "2m" as HumanDuration, expected: "a duration such as 2m or 1h")
        let filter = try settings.filter(
            parameters: ["table", "op", "where"].map { ($0, "nats.\($0)") },
            reason: { "\($0.code.rawValue): \($0.message)" }
        )
        let authentication = try Self.authentication(from: settings)
        let tls = try settings.bool("nats.tls", default: false)
        let caFile = settings.string("nats.ca_file")
        if let caFile {
            guard FileManager.default.isReadableFile(atPath: caFile) else { throw settings.fail("nats.ca_file", "\(caFile) cannot be read") }
            guard tls else { throw settings.fail("nats.ca_file", "a CA file needs nats.tls: true") }
        }
        let inFlight = try settings.int("nats.max_in_flight", default: 256, in: 1...65_536)
        let timeout = try settings.value("nats.ack_timeout", default: "5s" as HumanDuration, expected: "a duration such as 5s")
        guard let stream = settings.string("nats.stream") else { return nil }
        guard !stream.isEmpty, stream.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else {
            throw settings.fail("nats.stream", "a stream's name is letters, digits, - and _")
        }
        return NATSOutputConfiguration(
            servers: servers, subject: subject, stream: stream, createStream: createStream, duplicateWindow: window.duration,
            filter: filter, authentication: authentication, tls: tls ? NATSTLS(trustRootsFile: caFile) : nil,
            maximumInFlight: inFlight,
            acknowledgementTimeout: timeout.duration
        )
    }

    /// At most one way to authenticate; every secret comes from a file (or a systemd credential) and is never recorded.
    private static func authentication(from settings: SettingsReader) throws(ConfigurationError) -> NATSAuthentication {
        func secret(_ key: String) throws(ConfigurationError) -> String? {
            guard let reference = settings.string(key, recorded: false) else { return nil }
            let (path, lines) = try settings.secretFile(reference, key: key)
            settings.record(key, "\(path) (read)")
            return lines.joined(separator: "\n")
        }
        let user = settings.string("nats.user")
        let password = try secret("nats.password_file").map { $0.split(separator: "\n").first.map(String.init) ?? "" }
        let token = try secret("nats.token_file").map { $0.split(separator: "\n").first.map(String.init) ?? "" }
        let seed = try secret("nats.nkey_seed_file")
        let credentials = try secret("nats.credentials_file")
        let chosen = [("nats.user", user), ("nats.token_file", token), ("nats.nkey_seed_file", seed), ("nats.credentials_file", credentials)]
            .filter { $0.1 != nil }.map(\.0)
        if chosen.count > 1 {
            throw settings.fail(chosen[1], "use one way to authenticate, not \(chosen.joined(separator: " and "))")
        }
        if let password {
            guard let user else { throw settings.fail("nats.password_file", "a password needs nats.user") }
            return .password(user: user, password: password)
        }
        if user != nil { throw settings.fail("nats.user", "a user needs nats.password_file") }
        if let token { return .token(token) }
        do throws(NATSError) {
            if let seed { return .nkey(try NATSNKey(seed: seed)) }
            if let credentials { return try NATSAuthentication(credentialsFile: credentials) }
        } catch {
            throw settings.fail(seed != nil ? "nats.nkey_seed_file" : "nats.credentials_file", error.message)
        }
        return .none
    }

    public convenience init(configuration: NATSOutputConfiguration, context: OutputContext) throws {
        self.init(configuration: configuration, journal: context.journalFeed(named: Self.section), version: context.version, logger: context.logger)
    }

    public func reload(_ configuration: NATSOutputConfiguration) async {}

    public var report: OutputReport {
        let counts = statistics
        return OutputReport(
            statistics: OutputStatistics(
                health: counts.problem == nil ? "ok" : "degraded", reason: counts.problem, feed: .durable,
                delivered: UInt64(counts.published), lastEventID: journal.lastEventID.map(String.init),
                backlog: journal.backlog
            ),
            metrics: [
                .init("pgherald_nats_published_total", .counter(counts.published), help: "Events JetStream acknowledged and stored."),
                .init("pgherald_nats_duplicates_total", .counter(counts.duplicates), help: "Publishes JetStream acknowledged as repeats within its duplicate window."),
                .init("pgherald_nats_failures_total", .counter(counts.failures), help: "Connections to NATS that failed or broke; the backlog waits in the journal."),
            ]
        )
    }
}
