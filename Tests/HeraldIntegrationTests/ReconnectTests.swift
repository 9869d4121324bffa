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

            let reconnecting = await daemon.listener.waitForStatus { if case .reconnecting = $0 { true } else { false } }
            guard case .reconnecting = reconnecting else {
                Issue.record("listener did not notice the lost connection: \(reconnecting)")
                return
            }
            let started = ContinuousClock.now
            // Events written before the listener is back are lost in notify-only
            // mode, so keep writing until one arrives.
            var received: Event?
            for attempt in 1...50 where received == nil {
                try connection.execute("INSERT INTO course (short_code, name) VALUES ($1, 'Probe')", parameters: ["R\(attempt)"])
                received = try? await daemon.inbox.next(within: 0.2)
            }
            let event = try #require(received, "no event within 10 s of terminating the listener")
            #expect(event.table == TableName(name: "course"))
            #expect(ContinuousClock.now - started < .seconds(5))
            #expect(daemon.listener.status == .listening)
            try await daemon.stop()
        }
    }
}
