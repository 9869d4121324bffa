@testable import HeraldPostgres
import Testing

@Suite struct ReplayTurnsTests {
    @Test func aFreeConnectionReadsAtOnceAndThenNothingWaits() {
        var turns = ReplayTurns()
        let (ticket, action) = turns.request(for: "alice")
        #expect(action == .read(ticket))
        #expect(turns.finish() == .idle)
        let (again, next) = turns.request(for: "alice")
        #expect(next == .read(again), "the connection is free again")
    }

    /// The attack this answers: one holder queues a hundred replays' pages
    /// before a bystander's one; the bystander reads second, not 101st.
    @Test func aHolderWithManyReplaysTakesOnePageATurn() {
        var turns = ReplayTurns()
        let (first, _) = turns.request(for: "attacker")
        var attackers: [ReplayTurns.Ticket] = []
        for _ in 1...100 {
            let (ticket, action) = turns.request(for: "attacker")
            #expect(action == .wait)
            attackers.append(ticket)
        }
        let (bystander, action) = turns.request(for: "bystander")
        #expect(action == .wait)
        _ = first
        #expect(turns.finish() == .read(attackers[0]), "the attacker's turn came first")
        #expect(turns.finish() == .read(bystander), "then the bystander's, ahead of the attacker's other 99")
        for ticket in attackers.dropFirst() {
            #expect(turns.finish() == .read(ticket), "then the attacker's, in the order they asked")
        }
        #expect(turns.finish() == .idle)
    }

    @Test func holdersTakeTurnsInTheOrderTheyCame() {
        var turns = ReplayTurns()
        _ = turns.request(for: "a")
        let a = (1...3).map { _ in turns.request(for: "a").0 }
        let b = (1...2).map { _ in turns.request(for: "b").0 }
        let c = turns.request(for: "c").0
        var order: [ReplayTurns.Ticket] = []
        while case .read(let ticket) = turns.finish() { order.append(ticket) }
        #expect(order == [a[0], b[0], c, a[1], b[1], a[2]])
    }
}
