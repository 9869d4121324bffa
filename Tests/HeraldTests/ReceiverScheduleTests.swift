@testable import HeraldPostgres
import Testing

/// When the receiver's periodic statements fall due, transition by transition.
struct ReceiverScheduleTests {
    let start = ContinuousClock.now

    func schedule() -> ReceiverSchedule {
        ReceiverSchedule(
            backstopInterval: .seconds(10), checkpointInterval: .seconds(1), observedTickSpacing: .milliseconds(20),
            replanInterval: .seconds(2), now: start
        )
    }

    @Test func parkedWithNothingDeliveredLiveATickOnlyBacksTheDoorbellUp() {
        var schedule = schedule()
        #expect(schedule.tickInterval(deliveredLive: false, observed: true) == .seconds(10))
        #expect(!schedule.isTickDue(deliveredLive: false, observed: false, now: start + .seconds(9)))
        #expect(schedule.isTickDue(deliveredLive: false, observed: false, now: start + .seconds(10)))
        schedule.tickSent(now: start + .seconds(10))
        #expect(schedule.nextTick(deliveredLive: false, observed: false) == start + .seconds(20), "counted from the last tick")
    }

    @Test func eventsDeliveredLiveAreConfirmedByTheCheckpointOrSoonerWhenADurableOutputWaits() {
        let schedule = schedule()
        #expect(schedule.nextTick(deliveredLive: true, observed: false) == start + .seconds(1))
        #expect(schedule.nextTick(deliveredLive: true, observed: true) == start + .milliseconds(20))
        #expect(!schedule.isTickDue(deliveredLive: true, observed: true, now: start + .milliseconds(19)))
        #expect(schedule.isTickDue(deliveredLive: true, observed: true, now: start + .milliseconds(20)))
    }

    @Test func aCheckpointIsDueAnIntervalAfterTheLastOrAtOnceAfterACatchUp() {
        var schedule = schedule()
        #expect(!schedule.isCheckpointDue(now: start + .milliseconds(999)))
        #expect(schedule.isCheckpointDue(now: start + .seconds(1)))
        schedule.checkpointSaved(now: start + .seconds(1))
        #expect(!schedule.isCheckpointDue(now: start + .milliseconds(1_500)))
        schedule.checkpointAtOnce(now: start + .milliseconds(1_500))
        #expect(schedule.isCheckpointDue(now: start + .milliseconds(1_500)))
    }

    @Test func preparedStatementsAreForgottenEveryReplanInterval() {
        var schedule = schedule()
        #expect(!schedule.isReplanDue(now: start + .milliseconds(1_999)))
        #expect(schedule.isReplanDue(now: start + .seconds(2)))
        schedule.replanned(now: start + .seconds(3))
        #expect(!schedule.isReplanDue(now: start + .milliseconds(4_999)))
        #expect(schedule.isReplanDue(now: start + .seconds(5)))
    }
}
