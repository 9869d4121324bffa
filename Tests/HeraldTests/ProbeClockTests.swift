@testable import HeraldPostgres
import Testing

/// When the listener probes its notification path, transition by transition.
struct ProbeClockTests {
    let start = ContinuousClock.now

    func clock() -> ProbeClock {
        ProbeClock(interval: .seconds(30), timeout: .seconds(10), now: start)
    }

    @Test func theFirstProbeIsDueAtOnce() {
        let probes = clock()
        #expect(probes.isDue(now: start))
        #expect(!probes.isOverdue(now: start))
        #expect(probes.deadline <= start)
    }

    @Test func aProbeInFlightIsOverdueAfterTheTimeoutAndNoOtherGoesMeanwhile() {
        var probes = clock()
        let first = probes.send(now: start)
        #expect(first == 1)
        #expect(probes.inFlightSince == start)
        #expect(!probes.isDue(now: start + .seconds(60)), "one probe at a time")
        #expect(!probes.isOverdue(now: start + .seconds(9)))
        #expect(probes.isOverdue(now: start + .seconds(10)))
        #expect(probes.deadline == start + .seconds(10))
    }

    @Test func anythingHeardEndsTheProbeAndTheNextIsDueAnIntervalAfterTheLast() {
        var probes = clock()
        _ = probes.send(now: start)
        probes.heard()
        #expect(probes.inFlightSince == nil)
        #expect(!probes.isOverdue(now: start + .seconds(60)))
        #expect(!probes.isDue(now: start + .seconds(29)))
        #expect(probes.isDue(now: start + .seconds(30)))
        #expect(probes.deadline == start + .seconds(30))
        let second = probes.send(now: start + .seconds(30))
        #expect(second == 2, "each probe carries its number")
    }

    @Test func hearingWithNoProbeInFlightChangesNothing() {
        var probes = clock()
        _ = probes.send(now: start)
        probes.heard()
        let before = probes.deadline
        probes.heard()
        #expect(probes.deadline == before && probes.sent == 1)
    }
}
