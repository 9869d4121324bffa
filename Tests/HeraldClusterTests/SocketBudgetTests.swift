@testable import HeraldCluster
import Testing

/// The bytes one socket may hold: its channels' frames waiting, across them, and its unfinished message.
struct SocketBudgetTests {
    final class Channel {}

    @Test func framesPastTheSocketsBytesAreMissedAndWrittenOnesGiveTheirRoomBack() {
        let budget = SocketBudget(maximumBytes: 1_000)
        let first = Channel(), second = Channel()
        let a = ObjectIdentifier(first), b = ObjectIdentifier(second)
        budget.open(a)
        budget.open(b)
        #expect(budget.reserve(600, for: a))
        #expect(!budget.reserve(500, for: b), "the socket's budget is shared by its channels")
        #expect(budget.reserve(400, for: b))
        budget.release(600, for: a)
        #expect(budget.queuedBytes == 400)
        #expect(budget.reserve(500, for: a))
        budget.close(b)
        #expect(budget.queuedBytes == 500, "a closed channel's unread frames give their room back")
        #expect(!budget.reserve(1, for: b), "a closed channel takes nothing more")
        budget.release(400, for: b)
        #expect(budget.queuedBytes == 500, "nor gives back twice")
    }

    @Test func anUnfinishedMessageCountsAndKeepsItsRoomFromTheFrames() {
        let tally = SocketBudget.Tally()
        let budget = SocketBudget(maximumBytes: 1_000, messageBytes: 300, tally: tally)
        let channel = Channel()
        let a = ObjectIdentifier(channel)
        budget.open(a)
        #expect(budget.reserve(700, for: a))
        #expect(!budget.reserve(1, for: a), "frames leave room for one whole message")
        #expect(budget.holdFragment(200) && budget.holdFragment(100), "a message within its room is held beside full frames")
        #expect(!budget.holdFragment(1), "a fragment past the socket's budget is refused")
        #expect(budget.heldBytes == 1_000 && tally.heldBytes == 1_000)
        budget.release(700, for: a)
        #expect(!budget.reserve(401, for: a), "the unfinished message takes the frames' room while it is held")
        budget.finishMessage()
        #expect(budget.reserve(700, for: a))
        #expect(tally.heldBytes == 700)
        budget.close(a)
        #expect(tally.heldBytes == 0, "every socket's bytes, for /metrics, go when they are given back")
    }
}
