@testable import Herald
@testable import HeraldPostgres
import Testing

/// What the receiver holds between reading notifications and publishing, transition by transition.
struct ReceiverBatchTests {
    @Test func arrivalsFillTheBatchUpToItsCapacityAndAreTakenTogether() {
        var batch = ReceiverBatch(capacity: 3, resumable: false)
        #expect(batch.room == 3)
        #expect(batch.isIdle)
        batch.arrive(.event(makeEvent(1)))
        batch.arrive(.event(makeEvent(2)))
        #expect(batch.room == 1)
        #expect(!batch.isIdle)
        batch.arrivalsTaken()
        #expect(batch.room == 3)
        #expect(batch.isIdle)
    }

    @Test func aTickIsActedOnOnceAndTheLatestWins() {
        var batch = ReceiverBatch(capacity: 3, resumable: false)
        batch.tickArrived(TransactionSnapshot(xmin: 5, xmax: 5))
        batch.tickArrived(TransactionSnapshot(xmin: 7, xmax: 9, inProgress: [8]))
        #expect(!batch.isIdle, "a tick alone is work for a publish")
        #expect(batch.takeTick() == TransactionSnapshot(xmin: 7, xmax: 9, inProgress: [8]))
        #expect(batch.takeTick() == nil)
        #expect(batch.isIdle)
    }

    @Test func ringsAreCountedUntilTheParkingPolicyTakesThem() {
        var batch = ReceiverBatch(capacity: 3, resumable: false)
        batch.rang()
        batch.rang()
        #expect(batch.takeRings() == 2)
        #expect(batch.takeRings() == 0)
    }

    @Test func positionsReachTheCursorOnlyForLiveEventsAndOnlyOnce() {
        var batch = ReceiverBatch(capacity: 3, resumable: false)
        var cursor: DeliveryCursor? = DeliveryCursor(checkpoint: TransactionSnapshot(xmin: 10, xmax: 10))
        cursor!.swept(to: TransactionSnapshot(xmin: 20, xmax: 20))
        batch.admit(makeEvent(1, transaction: "30"), position: (id: 1, transactionID: 30))
        batch.admit(makeEvent(2, transaction: "31"))
        #expect(batch.admitted.map(\.id) == ["1", "2"])
        batch.recordPositions(in: &cursor)
        #expect(cursor!.deliveredLive == [1: 30], "the live event's position, and none for an event without one")
        batch.admittedPublished()
        #expect(batch.admitted.isEmpty)
        var other: DeliveryCursor? = DeliveryCursor(checkpoint: TransactionSnapshot(xmin: 10, xmax: 10))
        batch.recordPositions(in: &other)
        #expect(other!.deliveredLive.isEmpty, "positions are recorded once")
    }

    @Test func eachEventFollowedByAnotherTransactionsEndsItsOwnAndTheLastWaitsToBeTold() {
        var batch = ReceiverBatch(capacity: 8, resumable: false)
        for (id, transaction) in [(1, "7"), (2, "7"), (3, "8"), (4, "9"), (5, "9")] {
            batch.admit(makeEvent(id, transaction: transaction))
        }
        batch.markTransactionEndsBeforeTheLast()
        #expect(batch.admitted.map(\.endsTransaction) == [false, true, true, false, false])
        batch.endLastTransaction()
        #expect(batch.admitted.map(\.endsTransaction) == [false, true, true, false, true])
    }

    @Test func anEmptyBatchHasNoTransactionToEnd() {
        var batch = ReceiverBatch(capacity: 2, resumable: false)
        batch.markTransactionEndsBeforeTheLast()
        batch.endLastTransaction()
        #expect(batch.admitted.isEmpty)
    }

    @Test func eventsBecomeResumableOnceTheCatchUpIsDone() {
        var batch = ReceiverBatch(capacity: 2, resumable: false)
        #expect(!batch.resumable)
        batch.caughtUp()
        #expect(batch.resumable)
        #expect(ReceiverBatch(capacity: 2, resumable: true).resumable, "a reconnection's catch-up follows a run clients saw")
    }
}
