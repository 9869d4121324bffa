@testable import HeraldPostgres
import Testing

@Suite struct ReplayTurnsTests {
    @Test func freeTurnsGoAtOnceAndThenNothingWaits() {
        var turns = ReplayTurns(slots: 2)
        let (first, action) = turns.request(for: "alice")
        #expect(action == .go(first))
        let (second, next) = turns.request(for: "alice")
        #expect(next == .go(second), "two turns run at once")
        #expect(turns.request(for: "alice").1 == .wait)
        #expect(turns.finish(first) != .idle, "the waiting one goes")
    }

    /// The attack this answers: one holder queues a hundred replays' pages
    /// before a bystander's one; the bystander goes next, not 101st, and not
    /// after the attacker's page that had queued while its first one ran.
    @Test func aHolderWithManyReplaysTakesOnePageATurn() {
        var turns = ReplayTurns(slots: 1)
        let (first, _) = turns.request(for: "attacker")
        var attackers: [ReplayTurns.Ticket] = []
        for _ in 1...100 {
            let (ticket, action) = turns.request(for: "attacker")
            #expect(action == .wait)
            attackers.append(ticket)
        }
        let (bystander, action) = turns.request(for: "bystander")
        #expect(action == .wait)
        #expect(turns.finish(first) == .go(bystander), "the bystander's turn comes once the page in progress ends")
        var previous = bystander
        for ticket in attackers {
            #expect(turns.finish(previous) == .go(ticket), "then the attacker's, in the order they asked")
            previous = ticket
        }
        #expect(turns.finish(previous) == .idle)
    }

    @Test func holdersTakeTurnsAndTheOneJustServedGoesLast() {
        var turns = ReplayTurns(slots: 1)
        var previous = turns.request(for: "a").0
        let a = (1...3).map { _ in turns.request(for: "a").0 }
        let b = (1...2).map { _ in turns.request(for: "b").0 }
        let c = turns.request(for: "c").0
        var order: [ReplayTurns.Ticket] = []
        while case .go(let ticket) = turns.finish(previous) {
            order.append(ticket)
            previous = ticket
        }
        #expect(order == [b[0], a[0], c, b[1], a[1], a[2]])
    }

    @Test func aHolderWithAPageInProgressLetsOthersGoFirst() {
        var turns = ReplayTurns(slots: 2)
        let one = turns.request(for: "a").0, other = turns.request(for: "b").0
        let a2 = turns.request(for: "a").0, c = turns.request(for: "c").0
        #expect(turns.finish(other) == .go(c), "a's page still runs: c, who came later, goes first")
        #expect(turns.finish(one) == .go(a2))
    }

    @Test func aTurnThatEndsWhileOthersRunFreesOneSlot() {
        var turns = ReplayTurns(slots: 2)
        let one = turns.request(for: "a").0, two = turns.request(for: "a").0
        let waiting = turns.request(for: "b").0
        #expect(turns.finish(two) == .go(waiting))
        #expect(turns.finish(one) == .idle, "nothing else waits")
        #expect(turns.finish(waiting) == .idle)
        #expect(turns.request(for: "c").1 != .wait)
    }
}
