import Foundation
import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// The listener proves that notifications reach it, not just that its
    /// socket is open: a connection that goes on accepting bytes but
    /// delivers none is noticed by its probe, and the listener reconnects.
    @Suite
    struct NotificationPathTests {
        @Test(arguments: [Durability.durable, .notifyOnly])
        func aConnectionThatStopsDeliveringIsNoticedAndNothingCommittedIsLost(_ durability: Durability) async throws {
            let database = try TestDatabase.create(durability: durability)
            let cluster = try #require(TestDatabase.clusterConnInfo)
            let host = try #require(cluster.firstMatch(of: /host=(\S+)/)?.1)
            let port = try #require(cluster.firstMatch(of: /port=(\d+)/)?.1)
            let proxy = try SwallowingProxy(to: "\(host)/.s.PGSQL.\(port)")
            let throughProxy = TestDatabase(name: database.name, connInfo: "host=127.0.0.1 port=\(proxy.port) user=postgres dbname=\(database.name) sslmode=disable")
            let daemon = try await RunningListener(database: throughProxy, connectTimeout: .seconds(2), probeInterval: .seconds(1))
            try database.execute("INSERT INTO course (short_code, name) VALUES ('BEFORE', 'Path open')")
            #expect(try await daemon.inbox.take(1).first?.new?["short_code"] == .string("BEFORE"))

            proxy.swallowExistingConnections()
            try database.execute("INSERT INTO course (short_code, name) VALUES ('DURING', 'Path cut')")
            let noticed = ContinuousClock.now
            while daemon.listener.probeFailures == 0, ContinuousClock.now - noticed < .seconds(10) {
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(daemon.listener.probeFailures >= 1, "the probe noticed within its interval and timeout")
            #expect(ContinuousClock.now - noticed < .seconds(5))

            // Notify-only mode hears nothing committed before it listens again.
            while daemon.listener.reconnects == 0 || daemon.listener.health.status != .listening, ContinuousClock.now - noticed < .seconds(15) {
                try await Task.sleep(for: .milliseconds(100))
            }
            try database.execute("INSERT INTO course (short_code, name) VALUES ('AFTER', 'Reconnected')")
            let expected = durability == .durable ? ["DURING", "AFTER"] : ["AFTER"]
            let arrived = try await daemon.inbox.take(expected.count, within: 20)
            #expect(arrived.compactMap { $0.new?["short_code"]?.stringValue } == expected)
            #expect(daemon.listener.reconnects >= 1)
            try await daemon.stop()
        }
    }
}
