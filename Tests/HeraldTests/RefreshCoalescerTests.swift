import Testing
@testable import Herald

@Suite struct RefreshCoalescerTests {
    let start = ContinuousClock.now
    let configuration = RefreshCoalescer.Configuration(quietPeriod: .milliseconds(10), maximumDelay: .milliseconds(100))

    func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    @Test func aBurstGivesOneRefreshAfterItGoesQuiet() {
        var coalescer = RefreshCoalescer(configuration: configuration)
        #expect(coalescer.changeArrived(at: at(0), transaction: "7") == .startTimer(at(10)))
        for millisecond in 1...8 { #expect(coalescer.changeArrived(at: at(millisecond), transaction: "7") == .none) }
        #expect(coalescer.timerFired(at: at(10)) == .startTimer(at(18)))
        #expect(coalescer.timerFired(at: at(18)) == .refresh)
        #expect(coalescer.refreshFinished(at: at(30)) == .none)
        #expect(coalescer.state == .idle)
    }

    @Test func aSteadyStreamOfTransactionsStillRefreshesByTheMaximumDelay() {
        var coalescer = RefreshCoalescer(configuration: configuration)
        _ = coalescer.changeArrived(at: at(0), transaction: "1")
        var now = 0
        var action = RefreshCoalescer.Action.none
        while now < 100 {
            now += 5
            _ = coalescer.changeArrived(at: at(now), transaction: String(now))
            action = coalescer.timerFired(at: at(now))
            if action == .refresh { break }
        }
        #expect(action == .refresh)
        #expect(now == 100)
    }

    @Test func oneSlowTransactionIsNeverCutByTheMaximumDelay() {
        var coalescer = RefreshCoalescer(configuration: configuration)
        _ = coalescer.changeArrived(at: at(0), transaction: "42")
        for now in stride(from: 5, through: 500, by: 5) {
            _ = coalescer.changeArrived(at: at(now), transaction: "42")
            #expect(coalescer.timerFired(at: at(now)) != .refresh)
        }
        #expect(coalescer.timerFired(at: at(510)) == .refresh)
    }

    @Test func changesOfUnknownTransactionCountAsDifferent() {
        var coalescer = RefreshCoalescer(configuration: configuration)
        _ = coalescer.changeArrived(at: at(0), transaction: nil)
        _ = coalescer.changeArrived(at: at(95), transaction: nil)
        #expect(coalescer.timerFired(at: at(100)) == .refresh)
    }

    @Test func changesDuringARefreshCauseExactlyOneMore() {
        var coalescer = RefreshCoalescer(configuration: configuration)
        _ = coalescer.changeArrived(at: at(0), transaction: "1")
        #expect(coalescer.timerFired(at: at(10)) == .refresh)
        for millisecond in 11...20 { #expect(coalescer.changeArrived(at: at(millisecond), transaction: "2") == .none) }
        #expect(coalescer.refreshFinished(at: at(25)) == .startTimer(at(35)))
        #expect(coalescer.timerFired(at: at(35)) == .refresh)
        #expect(coalescer.refreshFinished(at: at(40)) == .none)
    }

    @Test func staleTimersAreIgnored() {
        var coalescer = RefreshCoalescer(configuration: configuration)
        #expect(coalescer.timerFired(at: at(0)) == .none)
        #expect(coalescer.refreshFinished(at: at(0)) == .none)
    }
}
