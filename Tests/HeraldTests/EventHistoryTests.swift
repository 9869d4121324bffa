import Herald
import Testing

@Suite struct EventHistoryTests {
    @Test func resumesAfterAnEventItHolds() throws {
        let broker = Broker(configuration: .init(historyCapacity: 10))
        broker.publish((1...5).map { makeEvent($0) })
        let (subscription, replay) = broker.subscribe(resumingAfter: "3")
        #expect(try #require(replay).map(\.id) == ["4", "5"])
        subscription.cancel()
        #expect(broker.subscribe(resumingAfter: "5").replay?.isEmpty == true)
    }

    @Test func aCatchUpEventIsNoStartingPointButIsReplayedAfterAnEarlierOne() throws {
        let broker = Broker(configuration: .init(historyCapacity: 10))
        broker.publish([makeEvent(1)])
        // Catch-up after a crash: transaction order, which a client of the previous run may have seen differently.
        broker.publish([makeEvent(7), makeEvent(5)], resumable: false)
        broker.publish([makeEvent(8)])
        #expect(broker.subscribe(resumingAfter: "5").replay == nil, "resumes from the journal instead")
        #expect(broker.subscribe(resumingAfter: "1").replay?.map(\.id) == ["7", "5", "8"])
        #expect(broker.subscribe(resumingAfter: "8").replay?.isEmpty == true)
    }

    @Test func eventsReadAgainFromTheJournalTakeTheCountsTheyWereDeliveredWith() {
        let broker = Broker(configuration: .init(historyCapacity: 3))
        broker.publish([makeEvent(1), makeEvent(2)])
        broker.publish([makeEvent(9), makeEvent(4)], resumable: false)
        // As the journal gives them: count 0. Event 1 is no longer held, and 6 was never delivered here.
        let stamped = broker.stampedAsDelivered([1, 2, 9, 4, 6].map { makeEvent($0) })
        #expect(stamped.map(\.count) == [0, 2, 3, 4, 0])
        #expect(String(decoding: stamped[1].jsonBytes, as: UTF8.self).contains("\"count\":2"))
    }

    @Test func filtersTheReplay() throws {
        let broker = Broker(configuration: .init(historyCapacity: 10))
        broker.publish([makeEvent(1), makeEvent(2, table: "student"), makeEvent(3)])
        let replay = broker.subscribe(EventFilter(tables: [TableName(schema: "public", name: "course")]), resumingAfter: "1").replay
        #expect(replay?.map(\.id) == ["3"])
    }

    @Test func forgetsTheOldestBeyondItsCapacity() {
        let broker = Broker(configuration: .init(historyCapacity: 3))
        broker.publish((1...5).map { makeEvent($0) })
        #expect(broker.subscribe(resumingAfter: "2").replay == nil)
        #expect(broker.subscribe(resumingAfter: "3").replay?.map(\.id) == ["4", "5"])
    }

    @Test func forgetsTheOldestBeyondItsByteLimit() {
        let broker = Broker(configuration: .init(historyCapacity: 100, historyByteLimit: 1))
        broker.publish((1...3).map { makeEvent($0) })
        #expect(broker.subscribe(resumingAfter: "2").replay == nil)
        #expect(broker.subscribe(resumingAfter: "3").replay?.isEmpty == true, "the newest event always stays")
    }

    @Test func continuesFromThePreviousRunsLastEvent() {
        let broker = Broker(configuration: .init(historyCapacity: 3))
        broker.historyContinues(afterEventID: "41")
        broker.publish([makeEvent(42), makeEvent(43)])
        #expect(broker.subscribe(resumingAfter: "41").replay?.map(\.id) == ["42", "43"])
        broker.publish([makeEvent(44), makeEvent(45)])
        #expect(broker.subscribe(resumingAfter: "41").replay == nil, "event 42 was forgotten")
        #expect(broker.subscribe(resumingAfter: "40").replay == nil)
    }
}
