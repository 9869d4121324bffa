import Herald
import Testing

@Suite struct DeliveryCursorTests {
    let listenSnapshot = TransactionSnapshot(xmin: 20, xmax: 25, inProgress: [22])

    @Test func firstStartHasNothingToCatchUpAndRecordsTheListenSnapshot() {
        var cursor = DeliveryCursor(checkpoint: nil)
        let result1 = cursor.connected(listenSnapshot: listenSnapshot)
        #expect(result1 == nil)
        let result2 = cursor.caughtUp()
        #expect(result2 == listenSnapshot)
        #expect(cursor.needsCheckpoint)
        cursor.checkpointSaved(listenSnapshot)
        #expect(!cursor.needsCheckpoint)
    }

    @Test func catchUpRangeRunsFromTheCheckpointToTheListenSnapshot() throws {
        var cursor = DeliveryCursor(checkpoint: TransactionSnapshot(xmin: 10, xmax: 10))
        let result3 = cursor.connected(listenSnapshot: listenSnapshot)
        let range = try #require(result3)
        #expect(range.from == TransactionSnapshot(xmin: 10, xmax: 10))
        #expect(range.to == listenSnapshot)
    }

    @Test func liveEventsCoveredByCatchUpAreDropped() {
        var cursor = DeliveryCursor(checkpoint: TransactionSnapshot(xmin: 10, xmax: 10))
        _ = cursor.connected(listenSnapshot: listenSnapshot)
        let result4 = cursor.shouldDeliverLive(id: 1, transactionID: 21)
        if result4 { cursor.recordDelivered(id: 1, transactionID: 21) }
        #expect(!result4, "committed before the listen snapshot: caught up")
        let result5 = cursor.shouldDeliverLive(id: 2, transactionID: 22)
        if result5 { cursor.recordDelivered(id: 2, transactionID: 22) }
        #expect(result5, "in progress at the listen snapshot: live")
        let result6 = cursor.shouldDeliverLive(id: 3, transactionID: 30)
        if result6 { cursor.recordDelivered(id: 3, transactionID: 30) }
        #expect(result6)
        let result7 = cursor.shouldDeliverLive(id: 3, transactionID: 30)
        if result7 { cursor.recordDelivered(id: 3, transactionID: 30) }
        #expect(!result7, "the same event twice")
        #expect(cursor.lastDeliveredEventID == 3)
    }

    @Test func aReconnectSkipsWhatWasDeliveredLiveSinceTheCheckpoint() {
        var cursor = DeliveryCursor(checkpoint: TransactionSnapshot(xmin: 10, xmax: 10))
        _ = cursor.connected(listenSnapshot: TransactionSnapshot(xmin: 10, xmax: 10))
        let result8 = cursor.shouldDeliverLive(id: 5, transactionID: 12)
        if result8 { cursor.recordDelivered(id: 5, transactionID: 12) }
        #expect(result8)
        cursor.disconnected()
        _ = cursor.connected(listenSnapshot: TransactionSnapshot(xmin: 15, xmax: 15))
        let result9 = cursor.admitCatchUp(id: 5, transactionID: 12)
        #expect(!result9, "delivered live before the gap")
        let result10 = cursor.admitCatchUp(id: 6, transactionID: 13)
        #expect(result10, "lost in the gap")
    }

    @Test func aCheckpointIsRecordedOnlyWhenItsOwnTickArrives() {
        var cursor = DeliveryCursor(checkpoint: TransactionSnapshot(xmin: 10, xmax: 10))
        _ = cursor.connected(listenSnapshot: TransactionSnapshot(xmin: 10, xmax: 10))
        #expect(!cursor.needsCheckpoint, "nothing delivered")
        cursor.recordDelivered(id: 1, transactionID: 11)
        cursor.recordDelivered(id: 2, transactionID: 13)
        #expect(cursor.needsCheckpoint)
        let tick = TransactionSnapshot(xmin: 12, xmax: 13)
        cursor.tickSent(snapshot: tick)
        #expect(!cursor.needsCheckpoint, "one tick at a time")
        let result11 = cursor.tickArrived(TransactionSnapshot(xmin: 11, xmax: 11))
        #expect(result11 == nil, "someone else's tick")
        let result12 = cursor.tickArrived(tick)
        #expect(result12 == tick)
        cursor.checkpointSaved(tick)
        #expect(cursor.deliveredSinceCheckpoint == [2: 13], "event 2 committed after the tick's snapshot")
        #expect(cursor.needsCheckpoint)
    }

    @Test func anEventLostBeforePublishingStaysEligibleForCatchUp() {
        var cursor = DeliveryCursor(checkpoint: TransactionSnapshot(xmin: 10, xmax: 10))
        _ = cursor.connected(listenSnapshot: TransactionSnapshot(xmin: 10, xmax: 10))
        #expect(cursor.shouldDeliverLive(id: 7, transactionID: 12), "admitted, then the connection broke before publishing")
        cursor.disconnected()
        _ = cursor.connected(listenSnapshot: TransactionSnapshot(xmin: 15, xmax: 15))
        let caughtUp = cursor.admitCatchUp(id: 7, transactionID: 12)
        #expect(caughtUp)
    }

    @Test func aTickInFlightIsForgottenWhenTheConnectionBreaks() {
        var cursor = DeliveryCursor(checkpoint: TransactionSnapshot(xmin: 10, xmax: 10))
        _ = cursor.connected(listenSnapshot: TransactionSnapshot(xmin: 10, xmax: 10))
        cursor.recordDelivered(id: 1, transactionID: 11)
        let tick = TransactionSnapshot(xmin: 12, xmax: 12)
        cursor.tickSent(snapshot: tick)
        cursor.disconnected()
        let result13 = cursor.tickArrived(tick)
        #expect(result13 == nil)
        #expect(cursor.needsCheckpoint)
    }

    @Test func afterTheFinalTickLaterCommitsAreLeftForTheNextRun() {
        var cursor = DeliveryCursor(checkpoint: TransactionSnapshot(xmin: 10, xmax: 10))
        _ = cursor.connected(listenSnapshot: TransactionSnapshot(xmin: 10, xmax: 10))
        let final = TransactionSnapshot(xmin: 15, xmax: 15)
        cursor.finalTickSent(snapshot: final)
        let result14 = cursor.shouldDeliverLive(id: 1, transactionID: 14)
        if result14 { cursor.recordDelivered(id: 1, transactionID: 14) }
        #expect(result14)
        let result15 = cursor.shouldDeliverLive(id: 2, transactionID: 15)
        if result15 { cursor.recordDelivered(id: 2, transactionID: 15) }
        #expect(!result15, "committed after the final snapshot")
        #expect(cursor.lastDeliveredEventID == 1)
    }
}
