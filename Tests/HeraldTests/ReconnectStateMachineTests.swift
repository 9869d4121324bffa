import Herald
import Testing
@testable import HeraldPostgres

@Suite struct ReconnectStateMachineTests {
    let backoff = BackoffPolicy(initialDelay: .milliseconds(100), maximumDelay: .seconds(1), multiplier: 2, jitter: 0.5)

    @Test func firstConnectionFailureEndsWithoutRetry() {
        var machine = ReconnectStateMachine(backoff: backoff)
        #expect(machine.start() == .connect(attempt: 0))
        #expect(machine.connectFailed(random: 0) == .failStartup)
        #expect(machine.state == .stopped)
        #expect(machine.backoffElapsed() == .none)
    }

    @Test func lostConnectionsReconnectWithGrowingCappedDelays() {
        var machine = ReconnectStateMachine(backoff: backoff)
        _ = machine.start()
        #expect(machine.connected() == .listen)
        #expect(machine.connectionLost(heldFor: .seconds(60), random: 0) == .waitBeforeReconnect(.milliseconds(100), attempt: 1))
        #expect(machine.backoffElapsed() == .connect(attempt: 1))
        #expect(machine.connectFailed(random: 0) == .waitBeforeReconnect(.milliseconds(200), attempt: 2))
        #expect(machine.backoffElapsed() == .connect(attempt: 2))
        #expect(machine.connectFailed(random: 0) == .waitBeforeReconnect(.milliseconds(400), attempt: 3))
        _ = machine.backoffElapsed()
        #expect(machine.connectFailed(random: 0) == .waitBeforeReconnect(.milliseconds(800), attempt: 4))
        _ = machine.backoffElapsed()
        #expect(machine.connectFailed(random: 0) == .waitBeforeReconnect(.seconds(1), attempt: 5))
        _ = machine.backoffElapsed()
        #expect(machine.connectFailed(random: 0) == .waitBeforeReconnect(.seconds(1), attempt: 6))
        _ = machine.backoffElapsed()
        #expect(machine.connected() == .listen)
        // A connection that held resets the schedule.
        #expect(machine.connectionLost(heldFor: .seconds(60), random: 0) == .waitBeforeReconnect(.milliseconds(100), attempt: 1))
    }

    /// A server that accepts each session and drops it at once (one shutting down, or a pooler before a
    /// dead server) is retried with growing delays: the schedule restarts only after a connection held.
    @Test func connectionsLostAtOnceKeepTheDelaysGrowing() {
        var machine = ReconnectStateMachine(backoff: backoff)
        _ = machine.start()
        _ = machine.connected()
        #expect(machine.connectionLost(heldFor: .milliseconds(5), random: 0) == .waitBeforeReconnect(.milliseconds(100), attempt: 1))
        _ = machine.backoffElapsed()
        #expect(machine.connected() == .listen)
        #expect(machine.state == .listening(attempt: 1))
        #expect(machine.connectionLost(heldFor: .milliseconds(5), random: 0) == .waitBeforeReconnect(.milliseconds(200), attempt: 2))
        _ = machine.backoffElapsed()
        _ = machine.connected()
        #expect(machine.connectionLost(heldFor: .seconds(2), random: 0) == .waitBeforeReconnect(.milliseconds(400), attempt: 3))
        _ = machine.backoffElapsed()
        _ = machine.connected()
        #expect(machine.connectionLost(heldFor: ReconnectStateMachine.stableConnection, random: 0) == .waitBeforeReconnect(.milliseconds(100), attempt: 1))
    }

    @Test func stopWorksFromEveryState() {
        var connecting = ReconnectStateMachine(backoff: backoff)
        _ = connecting.start()
        #expect(connecting.stop() == .close)

        var listening = ReconnectStateMachine(backoff: backoff)
        _ = listening.start()
        _ = listening.connected()
        #expect(listening.stop() == .close)
        #expect(listening.stop() == .none)
        #expect(listening.connectionLost(heldFor: .seconds(60), random: 0) == .none)

        var waiting = ReconnectStateMachine(backoff: backoff)
        _ = waiting.start()
        _ = waiting.connected()
        _ = waiting.connectionLost(heldFor: .seconds(60), random: 0.3)
        #expect(waiting.stop() == .close)
        #expect(waiting.backoffElapsed() == .none)
    }

    @Test func eventsOutOfTurnAreIgnored() {
        var machine = ReconnectStateMachine(backoff: backoff)
        #expect(machine.connected() == .none)
        #expect(machine.connectionLost(heldFor: .seconds(60), random: 0) == .none)
        _ = machine.start()
        #expect(machine.start() == .none)
        #expect(machine.connectionLost(heldFor: .seconds(60), random: 0) == .none)
    }
}

@Suite struct BackoffPolicyTests {
    @Test func jitterRemovesUpToItsFraction() {
        let policy = BackoffPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(30), multiplier: 2, jitter: 0.5)
        #expect(policy.delay(beforeAttempt: 1, random: 0) == .seconds(1))
        #expect(policy.delay(beforeAttempt: 1, random: 0.5) == .milliseconds(750))
        #expect(policy.delay(beforeAttempt: 1, random: 0.999_999) > .milliseconds(500))
        #expect(policy.delay(beforeAttempt: 3, random: 0) == .seconds(4))
    }

    @Test func hugeAttemptNumbersStayAtTheCap() {
        let policy = BackoffPolicy()
        #expect(policy.delay(beforeAttempt: 10_000, random: 0) == .seconds(30))
        #expect(policy.delay(beforeAttempt: .max, random: 1) == .seconds(15))
    }
}
