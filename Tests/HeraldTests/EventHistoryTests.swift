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

    /// Positions come from clients and from brokers that have counted nothing yet: none traps.
    @Test func anyPositionIsAnsweredWithoutATrap() throws {
        let broker = Broker(configuration: .init(historyCapacity: 3))
        broker.publish((1...5).map { makeEvent($0) })
        #expect(broker.historyEvents(afterCount: .max, matching: .all, limit: 10) == nil)
        #expect(broker.historyEvents(afterCount: .max - 1, matching: .all, limit: 10)?.events.isEmpty == true)
        #expect(broker.historyEvents(afterCount: 1_000, matching: .all, limit: 10)?.events.isEmpty == true)
        #expect(broker.historyEvents(afterCount: 0, matching: .all, limit: 10) == nil, "evicted")
        #expect(broker.subscribe(resumingAfterCount: .max).replay == nil)
        #expect(broker.subscribe(resumingAfter: "18446744073709551615").replay == nil)
        #expect(broker.subscribe(resumingAfter: "-1").replay == nil)
        let empty = Broker(configuration: .init(historyCapacity: 3))
        #expect(empty.historyEvents(afterCount: .max, matching: .all, limit: 10)?.events.isEmpty == true)
    }

    /// A socket stream that fell behind its mailbox reads the history like a cursor, by change count.
    @Test func aStreamBehindItsMailboxReadsTheHistoryByCountThenSubscribesWithoutAGap() throws {
        let broker = Broker(configuration: .init(historyCapacity: 5))
        let course = EventFilter(tables: [TableName(schema: "public", name: "course")])
        broker.publish((1...4).map { makeEvent($0, table: $0 == 2 ? "student" : "course") })
        let first = try #require(broker.historyEvents(afterCount: 0, matching: course, limit: 2))
        #expect(first.events.map(\.id) == ["1", "3"] && first.position == 3 && !first.isNewest, "the student row is passed over")
        let rest = try #require(broker.historyEvents(afterCount: first.position, matching: course, limit: 2))
        #expect(rest.events.map(\.id) == ["4"] && rest.position == 4 && rest.isNewest)
        // Published between the last read and the subscription: in the replay, so nothing is missed.
        broker.publish([makeEvent(5)])
        let (subscription, replay) = broker.subscribe(course, resumingAfterCount: rest.position)
        #expect(replay?.map(\.id) == ["5"])
        #expect(subscription.startCount == 5)
        broker.publish([makeEvent(6)])
        #expect(try subscription.pollDelivery().map { delivery in
            guard case .events(let events) = delivery else { return [] }
            return events.map(\.id)
        } == ["6"])
        // Once the history has let the next event go, the cursor is lost: the stream gets event: overflow.
        broker.publish((7...12).map { makeEvent($0) })
        #expect(broker.historyEvents(afterCount: 5, matching: course, limit: 10) == nil)
        #expect(broker.subscribe(course, resumingAfterCount: 5).replay == nil)
        #expect(broker.historyEvents(afterCount: 7, matching: course, limit: 10)?.events.map(\.id) == ["8", "9", "10", "11", "12"])
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

    /// The index keeps journal ids in blocks of 64 and drops whole blocks
    /// late; what it answers must still be only what the history holds.
    @Test func findsByIdAcrossBlocksOutOfOrderAndAfterEvictions() throws {
        let broker = Broker(configuration: .init(historyCapacity: 100))
        // Two transactions' runs interleaved across block boundaries, then ids sent by hand.
        let ids = Array(1...60) + Array(200...260) + Array(61...130) + Array(261...300)
        broker.publish(ids.map { makeEvent($0) })
        broker.publish(["tick-a", "0300", "tick-b"].map { id in
            Event(id: id, operation: .insert, table: TableName(schema: "public", name: "course"), transactionID: "1", at: "x")
        })
        let held = ids.suffix(97).map(String.init) + ["tick-a", "0300", "tick-b"]
        for (offset, id) in held.enumerated() {
            #expect(broker.subscribe(resumingAfter: id).replay?.map(\.id) == Array(held.dropFirst(offset + 1)), "after \(id)")
        }
        for evicted in ["1", "60", "200", "233", "64"] {
            #expect(broker.subscribe(resumingAfter: evicted).replay == nil, "\(evicted) was forgotten")
        }
        #expect(broker.subscribe(resumingAfter: "030").replay == nil, "ids are compared as written")
        // An id that comes again is found at its latest place, and forgotten with it.
        broker.publish([makeEvent(290), makeEvent(301)])
        #expect(broker.subscribe(resumingAfter: "290").replay?.map(\.id) == ["301"])
        broker.publish((400...520).map { makeEvent($0) })
        #expect(broker.subscribe(resumingAfter: "290").replay == nil)
        #expect(broker.subscribe(resumingAfter: "tick-a").replay == nil)
        #expect(broker.subscribe(resumingAfter: "421").replay?.count == 99)
    }

    @Test func forgetsTheOldestBeyondItsByteLimit() {
        let broker = Broker(configuration: .init(historyCapacity: 100, historyByteLimit: 1))
        broker.publish((1...3).map { makeEvent($0) })
        #expect(broker.subscribe(resumingAfter: "2").replay == nil)
        #expect(broker.subscribe(resumingAfter: "3").replay?.isEmpty == true, "the newest event always stays")
    }

    /// At the defaults a 100,000-row statement of 100-byte rows fits whole,
    /// so that streams reading it behind their buffers read it from memory.
    /// Beyond the history each would replay it from the journal on its own:
    /// with 100 streams that took 41 s instead of 4.
    @Test func theDefaultHistoryHoldsAHundredThousandTypicalEvents() throws {
        let broker = Broker()
        let payload = String(repeating: "x", count: 100)
        for batch in 0..<100 {
            let events = try (1...1000).map { index in
                let id = batch * 1000 + index
                return try Event(payload: #"{"id":"\#(id)","op":"INSERT","schema":"public","table":"bench_event","pk":{"id":\#(id)},"new":{"id":\#(id),"payload":"\#(payload)"},"old":null,"txid":"7791","at":"2026-11-26T12:00:00.123456Z"}"#)
            }
            broker.publish(events)
        }
        let oldest = try #require(broker.historyEvents(afterCount: 0, matching: .all, limit: 1), "the first event was forgotten")
        #expect(oldest.events.map(\.id) == ["1"])
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

    /// Without a history (`--history 0`), a resume from the previous run's
    /// last event must go to the journal: it was answered from memory, with
    /// nothing, and the events committed while the daemon was down were lost.
    @Test func withoutAHistoryThePreviousRunsLastEventIsNoStartingPoint() {
        let broker = Broker(configuration: .init(historyCapacity: 0))
        broker.historyContinues(afterEventID: "41")
        #expect(broker.subscribe(resumingAfter: "41").replay?.isEmpty == true, "nothing delivered since: nothing missed")
        broker.publish([makeEvent(42)])
        #expect(broker.subscribe(resumingAfter: "41").replay == nil, "event 42 was never held")
    }
}
