import Foundation
import HeraldCluster
import HeraldConfiguration
import HeraldOutput
import HeraldPostgres
import HeraldService
import HeraldSettings
@testable import pgherald
import Prometheus
import ServiceLifecycle
import Testing

/// What `serve` builds from a configuration, seen without starting it:
/// nothing here connects or listens.
struct DaemonTests {
    func daemon(_ text: String) async throws -> Daemon {
        let path = FileManager.default.temporaryDirectory.appending(path: "pgherald-daemon-\(UUID().uuidString.prefix(8)).yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let sources = ConfigurationSources(file: path, fileRequired: true, environment: [:], flags: [:])
        let settings = try await DaemonConfiguration.load(from: sources)
        return try Daemon(settings: settings, sources: sources, registry: PrometheusCollectorRegistry(), environment: [:], version: "test")
    }

    static let noSocket = "database: host=/nonexistent dbname=shop\nsocket:\n  enabled: false\n"

    @Test func aDatabaseDaemonReadsItsJournal() async throws {
        let daemon = try await daemon(Self.noSocket)
        #expect(daemon.source is PostgresListener)
        #expect(daemon.source.offers == [.journal, .durableFeeds])
        #expect(daemon.parts.first is JournalMaintenance, "the journal is maintained")
        #expect(daemon.parts.contains { $0 is PostgresListener })
        #expect(!daemon.parts.contains { $0 is EdgeFeed })
        #expect(daemon.services.count == daemon.parts.count)
    }

    @Test func anEdgeReadsTheClustersStreamInTheListenersPlace() async throws {
        let daemon = try await daemon(Self.noSocket + "source: nats\ncluster:\n  name: prod\n  stream: PGHERALD\n")
        #expect(daemon.source is EdgeFeed)
        #expect(daemon.source.offers == [.changeCount])
        #expect(!daemon.parts.contains { $0 is JournalMaintenance }, "an edge has no journal to maintain")
        #expect(!daemon.parts.contains { $0 is PostgresListener }, "the journal's listener does not run on an edge")
        #expect(daemon.parts.contains { $0 is EdgeFeed })
        #expect(daemon.source.health !== daemon.listener.health, "the edge reports its own state")
        #expect(daemon.source.health.durability == .durable, "the stream's events were durable where they came from")
        #expect(daemon.outputs.first(ClusterLink.self) != nil)
    }

    @Test func theSourceStopsBeforeTheOutputsDrain() async throws {
        let daemon = try await daemon(Self.noSocket + "stdout: json\n")
        let source = try #require(daemon.parts.firstIndex { $0 is PostgresListener })
        let stdout = try #require(daemon.parts.firstIndex { $0 is StdoutOutput })
        // A group stops its services in reverse: the later one stops first.
        #expect(source > stdout)
        #expect(daemon.parts.last is StopDeadline, "it hears the stop first and bounds it")
    }
}
