import Testing
@testable import HeraldPostgres

@Suite struct ParkingStateMachineTests {
    let policy = ParkingStateMachine.Policy()
    let start = ContinuousClock.now

    @Test func readingSweepsAtOnceWhileEventsComeAndEveryPollIntervalWhenNot() {
        var machine = ParkingStateMachine(policy: policy, now: start)
        #expect(machine.next(now: start) == .sweep, "a connection catches up first")
        machine.swept(found: 3, full: true, unrung: false, now: start)
        #expect(machine.next(now: start) == .sweep, "a full page: more is waiting")
        machine.swept(found: 3, full: false, unrung: false, now: start)
        #expect(machine.next(now: start) == .wait(until: start + policy.pollInterval))
        #expect(machine.next(now: start + policy.pollInterval) == .sweep)
        machine.swept(found: 0, full: false, unrung: false, now: start + policy.pollInterval)
        #expect(machine.next(now: start + policy.pollInterval) == .wait(until: start + policy.pollInterval * 2))
    }

    @Test func sweepsSpaceOutWhileEventsComeAtTheBusyRateAndCloseInWhenTheySlow() {
        var machine = ParkingStateMachine(policy: policy, now: start)
        var now = start
        // A window at the busy rate: the sweep after it waits the longer interval.
        let busyPerSweep = policy.busyRate / 1000 * 2
        while now - start < policy.wakeWindow {
            machine.swept(found: busyPerSweep, full: false, unrung: false, now: now)
            now += policy.pollInterval
        }
        machine.swept(found: busyPerSweep, full: false, unrung: false, now: now)
        #expect(machine.next(now: now) == .wait(until: now + policy.busyPollInterval))
        // A full page still means more is waiting.
        machine.swept(found: busyPerSweep, full: true, unrung: false, now: now)
        #expect(machine.next(now: now) == .sweep)
        // A window under the busy rate, but above half the wake rate, each event to a hundred subscribers:
        // it reads on, 1 ms apart again.
        let slower = now
        while now - slower < policy.wakeWindow {
            now += policy.busyPollInterval
            machine.swept(found: policy.wakeRings / 2, deliveries: policy.wakeRings / 2 * 100, full: false, unrung: false, now: now)
        }
        #expect(Double(policy.wakeRings / 2) < Double(policy.busyRate) * (policy.busyPollInterval / .seconds(1)), "the window above is under the busy rate")
        now += policy.busyPollInterval
        machine.swept(found: policy.wakeRings / 2, deliveries: policy.wakeRings / 2 * 100, full: false, unrung: false, now: now)
        #expect(machine.next(now: now) == .wait(until: now + policy.pollInterval))
    }

    @Test func fewDeliveriesASweepSpaceSweepsOutUpToTheLongestInterval() {
        var machine = ParkingStateMachine(policy: policy, now: start)
        var now = start
        // One subscriber at 2,000 events/s: sweeps 1 ms apart would feed two deliveries each.
        while now - start <= policy.wakeWindow {
            machine.swept(found: 2, full: false, unrung: false, now: now)
            now += policy.pollInterval
        }
        machine.swept(found: 2, full: false, unrung: false, now: now)
        let spaced = Duration.seconds(Double(policy.sweepBatch) / 2_000)
        #expect(spaced > policy.pollInterval && spaced <= policy.longestPollInterval)
        guard case .wait(let until) = machine.next(now: now) else {
            Issue.record("it waits between sweeps")
            return
        }
        #expect(abs((until - now - spaced) / .milliseconds(1)) < 1, "a sweep feeds about \(policy.sweepBatch) deliveries")
        // At 1,000 events/s, above the rate that parks, the longest interval bounds the latency it adds.
        let slower = now
        while now - slower <= policy.wakeWindow {
            now += policy.longestPollInterval
            machine.swept(found: 8, full: false, unrung: false, now: now)
        }
        #expect(machine.next(now: now) == .wait(until: now + policy.longestPollInterval))
        // Events nobody takes: the longest interval too.
        let unheard = now
        while now - unheard <= policy.wakeWindow {
            now += policy.longestPollInterval
            machine.swept(found: 20, deliveries: 0, full: false, unrung: false, now: now)
        }
        #expect(machine.next(now: now) == .wait(until: now + policy.longestPollInterval))
    }

    @Test func parksOnceSweepsHaveFoundNothingForParkAfter() {
        var machine = ParkingStateMachine(policy: policy, now: start)
        machine.swept(found: 1, full: false, unrung: false, now: start)
        var now = start
        while now - start < policy.parkAfter {
            now += policy.pollInterval
            #expect(machine.next(now: now) == (now - start >= policy.parkAfter ? .park : .sweep))
            machine.swept(found: 0, full: false, unrung: false, now: now)
        }
        #expect(machine.next(now: now) == .park)
        machine.didPark()
        #expect(machine.isClosing)
        #expect(machine.next(now: now) == .sweep, "the closing sweep, after the doorbell is armed")
        machine.swept(found: 0, full: false, unrung: false, now: now)
        #expect(machine.isParked)
        guard case .wait = machine.next(now: now) else {
            Issue.record("a parked listener with nothing unrung waits for the doorbell")
            return
        }
    }

    @Test func readingParksOnceEventsComeSlowerThanHalfTheWakeRate() {
        var machine = ParkingStateMachine(policy: policy, now: start)
        var now = start
        // A full window at the wake rate: it goes on reading.
        while now - start <= policy.wakeWindow {
            machine.swept(found: 2, deliveries: 200, full: false, unrung: false, now: now)
            now += policy.pollInterval
        }
        #expect(machine.next(now: now) == .sweep)
        // Then a window with a few events, each sweep finding one now and then.
        let slowStart = now
        var sweeps = 0
        while now - slowStart <= policy.wakeWindow {
            let found = sweeps % 8 == 0 ? 1 : 0
            machine.swept(found: found, deliveries: found * 100, full: false, unrung: false, now: now)
            sweeps += 1
            now += policy.pollInterval
        }
        #expect(machine.next(now: now) == .park, "fewer than \(policy.wakeRings / 2) events in \(policy.wakeWindow): notifications are cheaper")
    }

    @Test func parkedItSweepsForUnrungTransactionsWithABackoffUpToItsLimit() {
        var machine = ParkingStateMachine(policy: policy, now: start)
        machine.didPark()
        machine.swept(found: 0, full: false, unrung: true, now: start)
        #expect(machine.next(now: start) == .wait(until: start + policy.unrungPoll))
        var now = start + policy.unrungPoll
        var waits: [Duration] = []
        for _ in 0..<10 {
            #expect(machine.next(now: now) == .sweep)
            machine.swept(found: 0, full: false, unrung: true, now: now)
            guard case .wait(let until) = machine.next(now: now) else { Issue.record("expected a wait"); return }
            waits.append(until - now)
            now = until
        }
        #expect(waits.first == policy.unrungPoll * 2)
        #expect(waits.last == policy.unrungPollLimit)
        machine.swept(found: 1, full: false, unrung: false, now: now)
        guard case .wait(let until) = machine.next(now: now), until - now > .seconds(60) else {
            Issue.record("once they ended, only the doorbell wakes it")
            return
        }
    }

    @Test func manyRingsInTheWakeWindowMakeItReadAgainAndFewDoNot() {
        var machine = ParkingStateMachine(policy: policy, now: start)
        machine.didPark()
        machine.swept(found: 0, full: false, unrung: false, now: start)
        // A ring now and then: parked is cheaper for everyone.
        for second in 1...5 {
            machine.rang(policy.wakeRings - 1, now: start + .seconds(second))
            #expect(machine.next(now: start + .seconds(second)) != .unpark)
        }
        let burst = start + .seconds(10)
        machine.rang(policy.wakeRings / 2, now: burst)
        machine.rang(policy.wakeRings / 2, now: burst + policy.wakeWindow / 2)
        #expect(machine.next(now: burst + policy.wakeWindow / 2) == .unpark)
        machine.didUnpark(now: burst + policy.wakeWindow)
        #expect(!machine.isParked)
        #expect(machine.next(now: burst + policy.wakeWindow) == .sweep)
    }

    @Test func aNotificationLeftToASweepCallsForOneAtOnceParkedOrReading() {
        var machine = ParkingStateMachine(policy: policy, now: start)
        machine.swept(found: 0, full: false, unrung: false, now: start)
        machine.sweepSoon(now: start)
        #expect(machine.next(now: start) == .sweep, "reading")
        machine.didPark()
        machine.swept(found: 0, full: false, unrung: true, now: start)
        machine.sweepSoon(now: start)
        #expect(machine.next(now: start) == .sweep, "parked with unrung transactions")
    }
}
