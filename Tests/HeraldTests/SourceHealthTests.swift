import Herald
import Testing

/// What a source reports, as health checks and waiting outputs read it.
struct SourceHealthTests {
    @Test func waitersWakeWhenTheirStatusComesAndAStopWakesEveryone() async {
        let health = SourceHealth()
        #expect(health.status == .notStarted)
        async let connected = health.waitUntilConnected()
        async let listening = health.waitUntilListening()
        // Give both waiters time to register before the reports come.
        try? await Task.sleep(for: .milliseconds(50))
        health.report(.connecting)
        health.report(.catchingUp)
        #expect(await connected, "catching up is connected")
        health.report(.stopped)
        #expect(await listening == false, "stopped before listening")
        #expect(await health.waitUntilConnected() == false, "a stopped source answers at once")
    }

    @Test func aStatusAlreadyReachedAnswersAtOnce() async {
        let health = SourceHealth()
        health.report(.listening)
        #expect(await health.waitUntilListening())
        #expect(await health.waitForStatus { $0 == .listening } == .listening)
    }

    @Test func aStreamsPositionIsKeptUntilTheNextReportCarriesOne() {
        let health = SourceHealth(durability: .durable)
        #expect(health.durability == .durable, "a stream's events were durable where they came from")
        #expect(health.position == nil)
        health.report(.catchingUp, position: .init(source: "nats stream S", position: 41, lag: 3))
        health.report(.listening)
        #expect(health.status == .listening)
        #expect(health.position == .init(source: "nats stream S", position: 41, lag: 3))
    }

    @Test func aReportShowsProgressForTheWatchdog() async throws {
        let health = SourceHealth()
        try await Task.sleep(for: .milliseconds(30))
        let before = health.timeSinceProgress
        #expect(before >= .milliseconds(30))
        health.report(.connecting)
        #expect(health.timeSinceProgress < before)
        health.recordDurability(.notifyOnly)
        #expect(health.durability == .notifyOnly)
        // Long enough that the progress below shows whatever the machine's load does between two reads.
        try await Task.sleep(for: .milliseconds(20))
        let reported = health.timeSinceProgress
        health.report(.reconnecting(attempt: 1, lastError: "gone"))
        health.recordPosition(.init(source: "nats stream S", position: 7, lag: 0))
        #expect(health.status == .reconnecting(attempt: 1, lastError: "gone"), "a position leaves the state as it is")
        #expect(health.position?.position == 7)
        #expect(health.timeSinceProgress <= reported)
    }
}
