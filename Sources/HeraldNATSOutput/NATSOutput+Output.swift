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
        let servers = try settings.natsServers("nats.servers")
        let template = settings.string("nats.subject", default: "pgherald.{schema}.{table}.{op}")
        let subject: NATSSubjectTemplate
        do {
            subject = try NATSSubjectTemplate(template)
        } catch {
            throw settings.fail("nats.subject", error.description)
        }
        let createStream = try settings.bool("nats.create_stream", default: false)
        let window = try settings.value("nats.duplicate_window", default: "2m" as HumanDuration, expected: "a duration such as 2m or 1h")
        let replicas = try settings.int("nats.replicas", default: 1, in: 1...5)
        let filter = try settings.filter(
            parameters: ["table", "op", "where"].map { ($0, "nats.\($0)") },
            reason: { "\($0.code.rawValue): \($0.message)" }
        )
        let broadcasts = try settings.bool("nats.broadcasts", default: true)
        let authentication = try settings.natsAuthentication(under: "nats")
        let tls = try settings.natsTLS(under: "nats")
        let inFlight = try settings.int("nats.max_in_flight", default: 256, in: 1...65_536)
        let timeout = try settings.value("nats.ack_timeout", default: "5s" as HumanDuration, expected: "a duration such as 5s")
        guard let stream = settings.string("nats.stream") else { return nil }
        guard !stream.isEmpty, stream.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else {
            throw settings.fail("nats.stream", "a stream's name is letters, digits, - and _")
        }
        return NATSOutputConfiguration(
            servers: servers, subject: subject, stream: stream, createStream: createStream, duplicateWindow: window.duration,
            replicas: replicas, filter: filter, broadcasts: broadcasts, authentication: authentication, tls: tls,
            maximumInFlight: inFlight,
            acknowledgementTimeout: timeout.duration
        )
    }

    public convenience init(configuration: NATSOutputConfiguration, context: OutputContext) throws {
        self.init(
            configuration: configuration, journal: context.journalFeed(named: Self.section), reader: context.journal, version: context.version,
            logger: context.logger
        )
    }

    /// Ready once the cursor is placed: it starts at the moment it is placed.
    public func waitUntilReady() async -> Bool {
        await started.wait()
    }

    public var isReady: Bool { started.answer == true }

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
