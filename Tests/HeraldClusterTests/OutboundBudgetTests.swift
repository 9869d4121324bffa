@testable import HeraldCluster
import Testing

/// The bytes one socket's channels may have waiting, across them.
struct OutboundBudgetTests {
    final class Channel {}

    @Test func framesPastTheSocketsBytesAreMissedAndWrittenOnesGiveTheirRoomBack() {
        let budget = OutboundBudget(maximumBytes: 1_000)
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
}
