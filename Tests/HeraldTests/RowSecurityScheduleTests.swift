@testable import HeraldPostgres
import Testing

@Suite struct RowSecurityScheduleTests {
    typealias Schedule = RowSecuritySchedule<String, String>

    /// Each batch is `bytes` large for `heavy` cohorts and small for the rest.
    private func arrive(_ batch: String, in schedule: inout Schedule, heavy: Set<String> = [], events: Int = 1) {
        #expect(schedule.arrived(batch, events: events) { heavy.contains($0) ? 1_000_000 : 100 }.isEmpty)
    }

    private func next(_ schedule: inout Schedule) throws -> Schedule.Job {
        let job = schedule.next()
        return try #require(job, "a script is ready")
    }

    @Test func cohortsAtTheSameBatchAreJudgedInOneScript() {
        var schedule = Schedule()
        for cohort in ["alice", "bob", "carol"] { schedule.add(cohort) }
        arrive("b1", in: &schedule)
        let job = schedule.next()
        #expect(job?.cohorts == ["alice", "bob", "carol"])
        #expect(job?.batches == ["b1"])
        #expect(job?.isExpensive == false)
        #expect(schedule.next() == nil, "nothing else waits")
    }

    /// The attack: alice follows a table of 1 MB rows. Her batches go to a
    /// connection of their own, and bob's later batches are judged while hers run.
    @Test func aCohortWithLargeRowsIsJudgedAloneAndOthersGoOn() throws {
        var schedule = Schedule()
        schedule.add("alice")
        schedule.add("bob")
        arrive("b1", in: &schedule, heavy: ["alice"])
        let first = try next(&schedule)
        let second = try next(&schedule)
        let alice = [first, second].first { $0.cohorts == ["alice"] }
        let bob = [first, second].first { $0.cohorts == ["bob"] }
        #expect(alice?.isExpensive == true)
        #expect(bob?.isExpensive == false)
        #expect(alice?.connection != bob?.connection)

        schedule.finished(try #require(bob), slow: [])
        arrive("b2", in: &schedule, heavy: ["alice"])
        let next = try next(&schedule)
        #expect(next.cohorts == ["bob"] && next.batches == ["b2"], "bob does not wait for alice's first batch")
        #expect(schedule.next() == nil, "alice's second batch waits for her first")
    }

    @Test func aCohortsBatchesAreJudgedInOrderAndWhatWaitedIsJoined() throws {
        var schedule = Schedule()
        schedule.add("alice")
        arrive("b1", in: &schedule, heavy: ["alice"])
        let first = try next(&schedule)
        arrive("b2", in: &schedule, heavy: ["alice"])
        arrive("b3", in: &schedule, heavy: ["alice"])
        #expect(schedule.next() == nil)
        schedule.finished(first, slow: [])
        let second = try next(&schedule)
        #expect(second.batches == ["b2", "b3"], "one script judges what waited, in order")
        #expect(schedule.waitingEvents(of: "alice") == 2, "batches being judged still count until judged")
        schedule.finished(second, slow: [])
        #expect(schedule.waitingEvents(of: "alice") == 0)
    }

    /// Expensive scripts never take the last free connection: however many
    /// users' checks are slow, a cheap cohort's batch finds one.
    @Test func expensiveCohortsLeaveOneConnectionForTheCheapOnes() throws {
        var schedule = Schedule(configuration: .init(connections: 3))
        let attackers = (1...5).map { "attacker\($0)" }
        for cohort in attackers + ["bystander"] { schedule.add(cohort) }
        arrive("b0", in: &schedule)
        let first = try next(&schedule)
        schedule.finished(first, slow: Set(attackers))
        arrive("b1", in: &schedule)
        var jobs: [Schedule.Job] = []
        while let job = schedule.next() { jobs.append(job) }
        #expect(jobs.filter(\.isExpensive).map(\.cohorts.count) == [1, 1], "slow cohorts go alone, two at most")
        #expect(jobs.filter { !$0.isExpensive }.map(\.cohorts) == [["bystander"]])
        #expect(Set(jobs.map(\.connection)).count == 3)

        let bystander = try #require(jobs.first { !$0.isExpensive })
        schedule.finished(bystander, slow: [])
        arrive("b2", in: &schedule)
        let next = try next(&schedule)
        #expect(next.cohorts == ["bystander"], "the waiting attackers do not take the cheap connection")
        #expect(schedule.next() == nil)
    }

    /// Cohorts for whom the same batch is large cost alike: they share one
    /// script, apart from the cheap ones. Forty users following one table
    /// written in bulk were judged one at a time.
    @Test func cohortsForWhomABatchIsLargeShareAScript() throws {
        var schedule = Schedule()
        let readers = (1...40).map { "reader\($0)" }
        for cohort in readers + ["bystander"] { schedule.add(cohort) }
        arrive("b1", in: &schedule, heavy: Set(readers))
        let jobs = [try next(&schedule), try next(&schedule)]
        #expect(schedule.next() == nil)
        #expect(Set(jobs.map(\.cohorts)) == [readers.sorted(), ["bystander"]])
        #expect(jobs.first { $0.cohorts.count == 40 }?.isExpensive == true)
    }

    @Test func aBacklogOfLargeImagesEndsItsCohort() throws {
        var schedule = Schedule(configuration: .init(backlogBytes: 2_500_000))
        schedule.add("alice")
        schedule.add("bob")
        arrive("b1", in: &schedule, heavy: ["alice"])
        _ = [try next(&schedule), try next(&schedule)]
        arrive("b2", in: &schedule, heavy: ["alice"])
        #expect(schedule.arrived("b3", events: 1) { $0 == "alice" ? 1_000_000 : 100 } == ["alice"], "3 MB waiting, past 2.5 MB")
    }

    /// A slow policy is found by its time, not its bytes: after one slow
    /// script the cohort is judged alone, until a check of it is quick again.
    @Test func aSlowCheckMovesItsCohortAloneUntilItIsQuickAgain() throws {
        var schedule = Schedule()
        schedule.add("alice")
        schedule.add("bob")
        arrive("b1", in: &schedule)
        let together = try next(&schedule)
        #expect(together.cohorts == ["alice", "bob"])
        schedule.finished(together, slow: ["alice"])

        arrive("b2", in: &schedule)
        let first = try next(&schedule)
        let second = try next(&schedule)
        #expect(Set([first.cohorts, second.cohorts]) == [["alice"], ["bob"]])
        let alone = first.cohorts == ["alice"] ? first : second
        #expect(alone.isExpensive)
        schedule.finished(first, slow: [])
        schedule.finished(second, slow: [])

        arrive("b3", in: &schedule)
        #expect(schedule.next()?.cohorts == ["alice", "bob"], "quick again, alice rejoins the shared script")
    }

    /// A cohort thought cheap whose check ran past the shared script's
    /// limit was cancelled there: its batch waits, and is judged alone next.
    @Test func aCheckThatOverranTheSharedLimitIsJudgedAgainAlone() throws {
        var schedule = Schedule()
        schedule.add("alice")
        schedule.add("bob")
        arrive("b1", in: &schedule)
        let shared = try next(&schedule)
        #expect(shared.cohorts == ["alice", "bob"])
        schedule.finished(shared, slow: [], overran: ["alice"])
        #expect(schedule.waitingEvents(of: "alice") == 1 && schedule.waitingEvents(of: "bob") == 0)
        let again = try next(&schedule)
        #expect(again.cohorts == ["alice"] && again.batches == ["b1"] && again.isExpensive)
    }

    /// A script judges at most `bytesPerScript` of a cohort's images, unless one batch alone has more.
    @Test func whatWaitedIsJoinedUpToAScriptsBytes() throws {
        var schedule = Schedule(configuration: .init(bytesPerScript: 2_500_000))
        schedule.add("alice")
        arrive("b1", in: &schedule, heavy: ["alice"])
        let first = try next(&schedule)
        for batch in ["b2", "b3", "b4"] { arrive(batch, in: &schedule, heavy: ["alice"]) }
        schedule.finished(first, slow: [])
        #expect(try next(&schedule).batches == ["b2", "b3"], "two batches of 1 MB fit in 2.5 MB, a third does not")
    }

    @Test func aCohortThatFallsTooFarBehindIsEnded() throws {
        var schedule = Schedule(configuration: .init(backlogLimit: 10))
        schedule.add("alice")
        schedule.add("bob")
        arrive("b1", in: &schedule, heavy: ["alice"], events: 6)
        let jobs = [try next(&schedule), try next(&schedule)]
        for job in jobs where job.cohorts == ["bob"] { schedule.finished(job, slow: []) }
        #expect(schedule.arrived("b2", events: 6) { $0 == "alice" ? 1_000_000 : 100 } == ["alice"])
        #expect(schedule.cohortCount == 1)
        for job in jobs where job.cohorts == ["alice"] { schedule.finished(job, slow: []) }
        #expect(schedule.next()?.cohorts == ["bob"], "the ended cohort's job frees its connection and nothing more")
    }

    @Test func aFailedScriptsBatchesWaitAndThreeRefusalsEndTheCohort() throws {
        var schedule = Schedule()
        schedule.add("alice")
        arrive("b1", in: &schedule)
        for attempt in 1...3 {
            let job = try next(&schedule)
            #expect(job.batches == ["b1"], "attempt \(attempt) judges the same batch")
            #expect(schedule.failed(job, refused: true) == (attempt == 3 ? ["alice"] : []))
        }
        #expect(schedule.next() == nil)

        schedule.add("bob")
        arrive("b2", in: &schedule)
        for _ in 1...5 {
            let job = try next(&schedule)
            #expect(schedule.failed(job, refused: false).isEmpty, "a lost connection is waited out")
        }
        let job = try next(&schedule)
        schedule.finished(job, slow: [])
        #expect(schedule.waitingEvents(of: "bob") == 0)
    }

    @Test func aNewCohortStartsAtTheNextBatchAndJoinsTheOthersThere() throws {
        var schedule = Schedule()
        schedule.add("alice")
        arrive("b1", in: &schedule)
        let first = try next(&schedule)
        schedule.add("bob")
        arrive("b2", in: &schedule)
        #expect(schedule.next()?.cohorts == ["bob"], "bob's first batch does not wait for alice's")
        schedule.finished(first, slow: [])
        #expect(schedule.next()?.cohorts == ["alice"])
    }
}
