import Foundation
import HeraldCluster
@testable import HeraldConfiguration
import HeraldSettings
import Testing

/// `cluster:` and `source: nats`, read from a file as `serve` reads them.
struct ClusterConfigurationTests {
    func load(_ text: String) async throws -> DaemonConfiguration {
        let path = FileManager.default.temporaryDirectory.appending(path: "pgherald-cluster-\(UUID().uuidString.prefix(8)).yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return try await DaemonConfiguration.load(from: ConfigurationSources(file: path, fileRequired: true, environment: [:], flags: [:]))
    }

    func rejection(_ text: String) async throws -> ConfigurationError {
        do {
            _ = try await load(text)
        } catch let error as ConfigurationError {
            return error
        }
        Issue.record("accepted: \(text)")
        throw CancellationError()
    }

    @Test func aClusterHasDefaultsForEverythingButItsName() async throws {
        let settings = try await load("cluster:\n  name: prod\n")
        let cluster = try #require(settings[ClusterLink.self])
        #expect(cluster == ClusterConfiguration(name: "prod"))
        #expect(settings.source == .database)
        #expect(try await load("cluster:\n  nats: [nats://127.0.0.1:4222]\n")[ClusterLink.self] == nil, "off without a name")
    }

    @Test func badClusterSettingsNameTheirKey() async throws {
        #expect(try await rejection("cluster:\n  name: prod.eu\n").key == "cluster.name")
        #expect(try await rejection("cluster:\n  name: prod\n  nats: [http://127.0.0.1:4222]\n").key == "cluster.nats")
        let captured = try await rejection("cluster:\n  name: prod\nnats:\n  stream: EVENTS\n  subject: \"{schema}.{table}.{op}\"\n")
        #expect(captured.key == "nats.subject" && captured.reason.contains("pgherald-cluster.prod.heartbeat"), "\(captured)")
        #expect(try await load("cluster:\n  name: prod\nnats:\n  stream: EVENTS\n")[ClusterLink.self] != nil, "the default subjects are apart")
        let tooQuick = try await rejection("cluster:\n  name: prod\n  heartbeat: 2s\n  member_timeout: 5s\n")
        #expect(tooQuick.key == "cluster.member_timeout" && tooQuick.reason.contains("three heartbeats"))
    }

    @Test func anEdgeNeedsTheClustersStreamAndNoOutputWithAJournalCursor() async throws {
        let edge = """
            source: nats
            cluster:
              name: prod
              stream: PGHERALD

            """
        let settings = try await load(edge)
        #expect(settings.source == .nats && settings[ClusterLink.self]?.stream == "PGHERALD")
        #expect(settings.outputs["webhooks"] == nil, "the webhook service is off on an edge")
        #expect(try await rejection("source: nats\n").key == "source")
        #expect(try await rejection("source: nats\ncluster:\n  name: prod\n").key == "cluster.stream")
        #expect(try await rejection("source: elsewhere\n").key == "source")
        let webhook = try await rejection(edge + "webhooks:\n  orders:\n    url: http://127.0.0.1:9/hook\n    secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n")
        #expect(webhook.key == "webhooks" && webhook.reason.contains("database daemon"))
        #expect(try await rejection(edge + "nats:\n  stream: OTHER\n").key == "nats")
        #expect(try await rejection(edge + "event_log:\n  path: /tmp/x.jsonl\n  feed: durable\n").key == "event_log.feed")
        #expect(try await load(edge + "event_log:\n  path: /tmp/x.jsonl\n  feed: live\n").source == .nats)
    }
}
