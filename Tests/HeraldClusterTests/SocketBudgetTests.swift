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
        #expect(budget.reserve(600, for: a) == .reserved)
        #expect(budget.reserve(500, for: b) != .reserved, "the socket's budget is shared by its channels")
        #expect(budget.reserve(400, for: b) == .reserved)
        budget.release(600, for: a)
        #expect(budget.queuedBytes == 400)
        #expect(budget.reserve(500, for: a) == .reserved)
        budget.close(b)
        #expect(budget.queuedBytes == 500, "a closed channel's unread frames give their room back")
        #expect(budget.reserve(1, for: b) == .closed, "a closed channel takes nothing more, and misses nothing")
        budget.release(400, for: b)
        #expect(budget.queuedBytes == 500, "nor gives back twice")
    }

    @Test func anUnfinishedMessageCountsAndKeepsItsRoomFromTheFrames() {
        let tally = SocketBudget.Tally()
        let budget = SocketBudget(maximumBytes: 1_000, messageBytes: 300, tally: tally)
        let channel = Channel()
        let a = ObjectIdentifier(channel)
        budget.open(a)
        #expect(budget.reserve(700, for: a) == .reserved)
        #expect(budget.reserve(1, for: a) != .reserved, "frames leave room for one whole message")
        #expect(budget.holdFragment(200) && budget.holdFragment(100), "a message within its room is held beside full frames")
        #expect(!budget.holdFragment(1), "a fragment past the socket's budget is refused")
        #expect(budget.heldBytes == 1_000 && tally.heldBytes == 1_000)
        budget.release(700, for: a)
        #expect(budget.reserve(401, for: a) != .reserved, "the unfinished message takes the frames' room while it is held")
        budget.finishMessage()
        #expect(budget.reserve(700, for: a) == .reserved)
        #expect(tally.heldBytes == 700)
        budget.close(a)
        #expect(tally.heldBytes == 0, "every socket's bytes, for /metrics, go when they are given back")
    }

    @Test func aChannelMissesInEpisodesThatEndWhenItHasCaughtUp() {
        let budget = SocketBudget(maximumBytes: 1_000)
        let channel = Channel()
        let a = ObjectIdentifier(channel)
        budget.open(a)
        #expect(budget.reserve(900, for: a) == .reserved)
        #expect(budget.reserve(200, for: a) == .missed(startsEpisode: true))
        #expect(budget.reserve(200, for: a) == .missed(startsEpisode: false), "one episode, told once")
        #expect(budget.reserve(100, for: a) == .reserved)
        #expect(!budget.miss(100, for: a), "an inbox out of frames goes on with the same episode")
        #expect(budget.queuedBytes == 900, "a missed frame gives its bytes back")
        budget.release(500, for: a)
        #expect(budget.reserve(700, for: a) == .missed(startsEpisode: false), "written frames do not end it while others wait")
        budget.release(400, for: a)
        #expect(budget.reserve(600, for: a) == .reserved, "the channel caught up")
        #expect(budget.miss(600, for: a), "so a new episode begins")
    }
}
