import Herald
import HeraldWebhooks
import Testing

@Suite struct FeedPositionTests {
    let start = TransactionSnapshot(xmin: 100, xmax: 100)
    let now = TransactionSnapshot(xmin: 120, xmax: 120)

    @Test func aFeedAtNowHasNothingToRead() {
        var position = FeedPosition(snapshot: now)
        #expect(position.nextRange(now: now) == nil)
        #expect(!position.isBehind(now))
    }

    @Test func aBoundThatLagsBehindWhatWasFedHasNothingToReadAndMovesNothingBack() throws {
        // A durable output that follows the listener can be ahead of it after a restart.
        var position = FeedPosition(snapshot: now)
        #expect(position.nextRange(now: start) == nil)
        #expect(position.snapshot == now)
        let laterBound = TransactionSnapshot(xmin: 118, xmax: 125, inProgress: [118])
        // 118 was in progress in the bound and had finished by `now`: the bound does not include `now`.
        #expect(position.nextRange(now: laterBound) == nil)
        let caughtUp = TransactionSnapshot(xmin: 121, xmax: 125)
        let next = position.nextRange(now: caughtUp)
        let range = try #require(next)
        #expect(range.newer == caughtUp && range.older == now)
    }

    @Test func aSnapshotIncludesThoseTakenBeforeIt() {
        let earlier = TransactionSnapshot(xmin: 100, xmax: 110, inProgress: [103, 107])
        #expect(TransactionSnapshot(xmin: 107, xmax: 112, inProgress: [107, 111]).includes(earlier))
        #expect(earlier.includes(earlier))
        // 105 finished before `earlier`, so a snapshot showing it in progress was taken before.
        #expect(!TransactionSnapshot(xmin: 105, xmax: 112, inProgress: [105]).includes(earlier))
        #expect(!TransactionSnapshot(xmin: 100, xmax: 108).includes(earlier))
        #expect(!earlier.includes(TransactionSnapshot(xmin: 111, xmax: 111)))
    }

    @Test func aRangeReadWholeMovesTheSnapshotUp() throws {
        var position = FeedPosition(snapshot: start)
        let first = position.nextRange(now: now)
        let range = try #require(first)
        #expect(range.newer == now && range.older == start && range.after == nil)
        position.fed(through: FeedPosition.Row(transactionID: 110, id: 7), rangeDone: true)
        #expect(position == FeedPosition(snapshot: now))
        #expect(!position.isBehind(now))
    }

    @Test func aRangeFedInPartsGoesOnAfterTheLastRowFed() throws {
        var position = FeedPosition(snapshot: start)
        _ = position.nextRange(now: now)
        position.fed(through: FeedPosition.Row(transactionID: 105, id: 3), rangeDone: false)
        #expect(position.isBehind(now))
        // A later round keeps to the old range until it is done, however far now has moved.
        let later = TransactionSnapshot(xmin: 150, xmax: 150)
        let continued = position.nextRange(now: later)
        let range = try #require(continued)
        #expect(range.newer == now && range.older == start)
        #expect(range.after == FeedPosition.Row(transactionID: 105, id: 3))
        position.fed(through: nil, rangeDone: true)
        #expect(position.snapshot == now && position.target == nil && position.after == nil)
        let following = position.nextRange(now: later)
        let next = try #require(following)
        #expect(next.newer == later && next.older == now && next.after == nil)
    }

    @Test func aReadThatFedNothingKeepsItsPlace() {
        var position = FeedPosition(snapshot: start)
        _ = position.nextRange(now: now)
        position.fed(through: FeedPosition.Row(transactionID: 101, id: 1), rangeDone: false)
        position.fed(through: nil, rangeDone: false)
        #expect(position.after == FeedPosition.Row(transactionID: 101, id: 1))
    }

    @Test func withoutATargetThereIsNoPositionInside() {
        let position = FeedPosition(snapshot: start, target: nil, after: FeedPosition.Row(transactionID: 1, id: 1))
        #expect(position.after == nil)
    }
}
