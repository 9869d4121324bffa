import Foundation
import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    @Suite
    struct ReconnectTests {
        @Test func eventsFlowAgainAfterTheListenerBackendIsTerminated() async throws {
            let database = try TestDatabase.create()
            let daemon = try await RunningListener(database: database)
            let connection = try database.connect()
            let terminated = try connection.execute("""
                SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE datname = current_database() AND application_name = 'pgherald'
                """)
            #expect(terminated.rows == [["t"]])

            let reconnecting = await daemon.listener.health.waitForStatus { if case .reconnecting = $0 { true } else { false } }
            guard case .reconnecting = reconnecting else {
                Issue.record("listener did not notice the lost connection: \(reconnecting)")
                return
            }
            let started = ContinuousClock.now
            // Keep writing until one arrives; in durable mode the first, written
            // while the listener was away, is caught up from the journal.
            var received: Event?
            for attempt in 1...50 where received == nil {
                try connection.execute("INSERT INTO course (short_code, name) VALUES ($1, 'Probe')", parameters: ["R\(attempt)"])
                received = try? await daemon.inbox.next(within: 0.2)
            }
            let event = try #require(received, "no event within 10 s of terminating the listener")
            #expect(event.table == TableName(name: "course"))
            #expect(event.new?["short_code"] == .string("R1"))
            #expect(ContinuousClock.now - started < .seconds(5))
            // Catch-up publishes before the status says listening.
            #expect(await daemon.listener.health.waitUntilListening())
            try await daemon.stop()
        }
    }
}
