import Herald
import Testing

@Suite struct DeliveryCursorTests {
    let checkpoint = TransactionSnapshot(xmin: 10, xmax: 10)

    @Test func aFirstStartBeginsAtItsFirstSweepWithNothingToRead() {
        var cursor = DeliveryCursor(checkpoint: nil)
        let now = TransactionSnapshot(xmin: 20, xmax: 25, inProgress: [22])
        #expect(cursor.covered == nil, "no checkpoint: nothing to read before now")
        #expect(!cursor.needsCheckpoint, "nothing to record before the first sweep")
        cursor.swept(to: now)
        #expect(cursor.covered == now)
        #expect(cursor.needsCheckpoint)
        cursor.checkpointSaved(now)
        #expect(!cursor.needsCheckpoint)
    }

    @Test func theRestOfATransactionThatBeganLiveGoesLiveAfterTheDaemonStopsBeingParked() {
        var cursor = DeliveryCursor(checkpoint: checkpoint)
        cursor.swept(to: TransactionSnapshot(xmin: 20, xmax: 20))
        #expect(cursor.live(id: 1, transactionID: 30, parked: true) == .deliver)
        cursor.recordDelivered(id: 1, transactionID: 30)
        cursor.unparked()
        #expect(cursor.live(id: 2, transactionID: 30, parked: false) == .deliver, "its first event went live: the rest follows it")
        #expect(cursor.live(id: 3, transactionID: 31, parked: false) == .sweep, "another transaction waits for the sweep")
        cursor.recordDelivered(id: 2, transactionID: 30)
        cursor.swept(to: TransactionSnapshot(xmin: 32, xmax: 32))
        #expect(cursor.live(id: 4, transactionID: 30, parked: false) == .skip, "covered now")
        #expect(cursor.live(id: 5, transactionID: 33, parked: false) == .sweep, "a new transaction while reading the journal")
    }

    @Test func aRestartSweepsFromItsCheckpoint() {
        let cursor = DeliveryCursor(checkpoint: checkpoint)
        #expect(cursor.covered == checkpoint)
        #expect(!cursor.needsCheckpoint)
    }

    @Test func liveEventsOfCoveredTransactionsAreSkippedAndEachIsDeliveredOnce() {
        var cursor = DeliveryCursor(checkpoint: checkpoint)
        cursor.swept(to: TransactionSnapshot(xmin: 20, xmax: 25, inProgress: [22]))
        #expect(cursor.live(id: 1, transactionID: 21, parked: true) == .skip, "the sweep delivered it")
        #expect(cursor.live(id: 2, transactionID: 22, parked: true) == .deliver, "in progress at the sweep")
        cursor.recordDelivered(id: 2, transactionID: 22)
        #expect(cursor.live(id: 2, transactionID: 22, parked: true) == .skip, "the same event twice")
        #expect(cursor.lastDeliveredEventID == 2)
    }

    @Test func aSweepSkipsWhatWasDeliveredLiveAndForgetsItOnceCovered() {
        var cursor = DeliveryCursor(checkpoint: checkpoint)
        cursor.recordDelivered(id: 5, transactionID: 12)
        cursor.disconnected()
        let repeated = cursor.admitSwept(id: 5, transactionID: 12)
        #expect(!repeated, "delivered live before the gap")
        let lost = cursor.admitSwept(id: 6, transactionID: 13)
        #expect(lost, "lost in the gap")
        cursor.swept(to: TransactionSnapshot(xmin: 15, xmax: 15))
        #expect(cursor.deliveredLive.isEmpty)
        #expect(cursor.lastDeliveredEventID == 6)
    }

    @Test func anEventLostBeforePublishingStaysEligibleForASweep() {
        let cursor = DeliveryCursor(checkpoint: checkpoint)
        #expect(cursor.live(id: 7, transactionID: 12, parked: true) == .deliver, "decided on, then the connection broke before publishing")
        var after = cursor
        after.disconnected()
        let swept = after.admitSwept(id: 7, transactionID: 12)
        #expect(swept)
    }

    @Test func transactionsInProgressWhenParkingAreSweptNotTakenLive() {
        var cursor = DeliveryCursor(checkpoint: checkpoint)
        cursor.parked(sweptTo: TransactionSnapshot(xmin: 20, xmax: 30, inProgress: [21, 24]))
        #expect(cursor.unrung == [21, 24])
        #expect(cursor.live(id: 9, transactionID: 24, parked: true) == .sweep, "it may have written events before that did not ring")
        #expect(cursor.live(id: 10, transactionID: 31, parked: true) == .sweep, "21 or 24 may have committed before it, unrung")
        #expect(cursor.isUnrung(21))
        cursor.swept(to: TransactionSnapshot(xmin: 24, xmax: 32, inProgress: [24]))
        #expect(cursor.unrung == [24], "21 ended")
        cursor.swept(to: TransactionSnapshot(xmin: 32, xmax: 32))
        #expect(cursor.unrung.isEmpty)
        #expect(cursor.live(id: 11, transactionID: 33, parked: true) == .deliver, "every transaction since the park rings")
        #expect(cursor.live(id: 11, transactionID: 33, parked: false) == .sweep, "reading, commits before it may not have rung")
        cursor.parked(sweptTo: TransactionSnapshot(xmin: 40, xmax: 42, inProgress: [40]))
        cursor.unparked()
        #expect(cursor.unrung.isEmpty, "reading, every commit is swept")
    }

    @Test func aTickConfirmsASweepOnlyWhenNoSweepOvertookIt() {
        var cursor = DeliveryCursor(checkpoint: checkpoint)
        let tick = TransactionSnapshot(xmin: 12, xmax: 13)
        cursor.tickSent(snapshot: tick)
        let foreign = cursor.tickArrived(TransactionSnapshot(xmin: 11, xmax: 11))
        #expect(foreign == nil, "someone else's tick")
        let own = cursor.tickArrived(tick)
        #expect(own == tick)
        cursor.tickSent(snapshot: tick)
        cursor.tickOvertaken()
        let overtaken = cursor.tickArrived(tick)
        #expect(overtaken == nil, "a newer sweep covered it: sweeping to it would move back")
        cursor.tickSent(snapshot: tick)
        cursor.disconnected()
        let lost = cursor.tickArrived(tick)
        #expect(lost == nil, "lost with its connection")
    }
}
