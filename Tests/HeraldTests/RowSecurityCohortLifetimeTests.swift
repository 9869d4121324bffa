@testable import Herald
@testable import HeraldPostgres
import Logging
import Testing

/// A cohort outlives its last subscriber by its lifetime, then goes, with
/// the gate's subscription to the daemon's broker, whether or not any event
/// arrives. The gate's database is never reached: nothing is judged.
@Suite struct RowSecurityCohortLifetimeTests {
    @Test func aCohortWithNoSubscriberIsDroppedWhenItsLifetimeEndsThoughNoEventArrives() async throws {
        let broker = Broker()
        let gate = RowSecurityGate(
            configuration: .init(idleLifetime: .milliseconds(200)), broker: broker,
            database: try ConnectionString("host=/nonexistent/pgherald-test port=1 connect_timeout=1"),
            logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        )
        let running = Task { await gate.run() }
        defer { running.cancel() }
        let cohort = gate.cohort(for: RowSecurityIdentity(role: "authenticated", claims: ["sub": .string("alice")]))
        let subscription = cohort.broker.subscribe(kind: "sse")
        #expect(broker.hasSubscribers, "the gate reads the daemon's broker for its cohort")

        // Subscribed, it stays past its lifetime.
        try await Task.sleep(for: .milliseconds(600))
        #expect(gate.currentStatistics.cohorts == 1)

        subscription.cancel()
        let left = ContinuousClock.now
        while gate.currentStatistics.cohorts > 0, ContinuousClock.now - left < .seconds(5) {
            try await Task.sleep(for: .milliseconds(20))
        }
        let gone = ContinuousClock.now - left
        #expect(gate.currentStatistics.cohorts == 0, "the cohort outlived its last subscriber by \(gone)")
        #expect(gone >= .milliseconds(200), "dropped \(gone) after its last subscriber left; its lifetime is 200 ms")
        #expect(!broker.hasSubscribers, "the gate still reads the daemon's broker with no cohort")
    }
}
