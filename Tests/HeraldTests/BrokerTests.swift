import Synchronization
import Testing
@testable import Herald

@Suite struct BrokerTests {
    @Test func stampsGlobalCountsAndCountsPerTable() {
        let broker = Broker()
        let stamped = broker.publish([makeEvent(1, table: "course"), makeEvent(2, table: "student"), makeEvent(3, table: "course")])
        #expect(stamped.map(\.count) == [1, 2, 3])
        #expect(broker.publish(makeEvent(4, table: "student")).count == 4)
        let statistics = broker.statistics
        #expect(statistics.changeCount == 4)
        #expect(statistics.tableCounts == [TableName(name: "course"): 2, TableName(name: "student"): 2])
    }

    @Test func broadcastsReachOnlyThoseWhoAskForTheirTopics() async throws {
        let broker = Broker()
        let rows = broker.subscribe()
        let topics = broker.subscribe(.topics(["room-1"]))
        broker.publish([makeEvent(1), makeEvent(2, table: "room-1", schema: "realtime", operation: .broadcast), makeEvent(3)])
        #expect(try await rows.nextBatch().map(\.id) == ["1", "3"], "a subscriber of every row change, given a batch with a broadcast")
        #expect(try await topics.nextBatch().map(\.id) == ["2"])
    }

    @Test func encodesEachEventOnceWithItsCount() {
        let broker = Broker()
        let event = broker.publish(makeEvent(9))
        #expect(event.encodedJSON != nil)
        #expect(event.jsonText.hasPrefix(#"{"id":"9","count":1,"op":"INSERT""#))
    }

    @Test func framesAnEventAsAServerSentEventAroundItsJSON() {
        let event = Broker().publish(makeEvent(9, operation: .delete))
        let frame = String(decoding: event.serverSentEventFrame, as: UTF8.self)
        #expect(frame == "id: 9\nevent: DELETE\ndata: \(event.jsonText)\n\n")
        #expect(makeEvent(9, operation: .delete).serverSentEventFrame.starts(with: "id: 9\nevent: DELETE\ndata: {".utf8))
    }

    @Test func theHistoryCountsWhatItsEventsHoldInMemory() {
        let broker = Broker(configuration: .init(historyCapacity: 1000, historyByteLimit: 64 << 10))
        let row: JSONObject = ["id": .number(JSONNumber(1)), "payload": .string(String(repeating: "x", count: 100))]
        let published = broker.publish((1...1000).map {
            Event(id: String($0), operation: .insert, table: TableName(name: "bench_event"), primaryKey: ["id": .number(JSONNumber(Int64($0)))],
                  new: row, transactionID: "7", at: "2026-11-26T12:00:00.000000Z")
        })
        let each = published[0].retainedBytes
        // Its JSON, rows and object, sized to fit: not the JSON alone, nor twice it.
        #expect(each > published[0].jsonBytes.count + 300 && each < 1000, "\(each)")
        let (held, bytes) = broker.state.withLock { ($0.history.count, $0.history.byteCount) }
        #expect(held < 1000 && bytes <= 64 << 10 && bytes > (64 << 10) - 2 * each, "the byte limit, not the capacity of 1000, bounds it")
    }

    @Test func deliversInOrderToMatchingSubscribersOnly() async throws {
        let broker = Broker()
        let everything = broker.subscribe()
        let courses = broker.subscribe(EventFilter(tables: [TableName(name: "course")]))
        let deletes = broker.subscribe(EventFilter(operations: .delete))
        broker.publish([
            makeEvent(1, table: "course"),
            makeEvent(2, table: "student"),
            makeEvent(3, table: "course", operation: .delete),
            makeEvent(4, table: "student", operation: .delete),
        ])
        broker.shutdown()
        #expect(try await collectAll(everything).map(\.id) == ["1", "2", "3", "4"])
        #expect(try await collectAll(courses).map(\.id) == ["1", "3"])
        #expect(try await collectAll(deletes).map(\.count) == [3, 4])
    }

    @Test func aSubscriberOfSeveralTablesGetsAMixedBatchOnceInOrder() async throws {
        let broker = Broker()
        let both = broker.subscribe(EventFilter(tables: [TableName(name: "course"), TableName(name: "student")]))
        broker.publish([
            makeEvent(1, table: "student"),
            makeEvent(2, table: "country"),
            makeEvent(3, table: "course"),
            makeEvent(4, table: "student"),
        ])
        broker.shutdown()
        #expect(try await collectAll(both).map(\.id) == ["1", "3", "4"])
    }

    @Test func slowSubscriberOverflowsWithoutAffectingOthers() async throws {
        let broker = Broker(configuration: .init(mailboxCapacity: 10))
        let stalled = broker.subscribe()
        let reader = broker.subscribe(capacity: 1000)
        // The publisher never waits: 500 events go out although one subscriber reads nothing.
        broker.publish((1...500).map { makeEvent($0) })
        broker.shutdown()

        var received: [Event] = []
        await #expect(throws: SubscriptionOverflowError(capacity: 10)) {
            for try await event in stalled { received.append(event) }
        }
        #expect(received.map(\.count) == Array(1...10))
        #expect(try await collectAll(reader).count == 500)
        #expect(broker.statistics.overflowCount == 1)
    }

    @Test func overflowedSubscriberIsRemoved() {
        let broker = Broker(configuration: .init(mailboxCapacity: 2))
        let subscription = broker.subscribe()
        broker.publish((1...3).map { makeEvent($0) })
        #expect(broker.statistics.subscriberCount == 0)
        withExtendedLifetime(subscription) {}
    }

    @Test func droppingOrCancellingASubscriptionUnregistersIt() async throws {
        let broker = Broker()
        var subscription: Subscription? = broker.subscribe(EventFilter(tables: [TableName(name: "a"), TableName(name: "b")]))
        #expect(broker.statistics.subscriberCount == 1)
        subscription = nil
        #expect(broker.statistics.subscriberCount == 0)
        _ = subscription

        let cancelled = broker.subscribe()
        cancelled.cancel()
        #expect(broker.statistics.subscriberCount == 0)
        #expect(try await cancelled.nextBatch().isEmpty)
    }

    @Test func cancellingTheConsumingTaskEndsTheStream() async throws {
        let broker = Broker()
        let subscription = broker.subscribe()
        let consumer = Task {
            var count = 0
            for try await _ in subscription { count += 1 }
            return count
        }
        broker.publish(makeEvent(1))
        try await Task.sleep(for: .milliseconds(50))
        consumer.cancel()
        let count = try await withTimeout(seconds: 5) { try await consumer.value }
        #expect(count == 1)
    }

    @Test func subscribingAfterShutdownEndsAtOnce() async throws {
        let broker = Broker()
        broker.shutdown()
        #expect(try await collectAll(broker.subscribe()).isEmpty)
    }

    @Test func concurrentConsumersEachSeeEveryEventInOrder() async throws {
        let broker = Broker()
        let subscriptions = (0..<50).map { _ in broker.subscribe() }
        let results = Task {
            try await withThrowingTaskGroup(of: [UInt64].self) { group in
                for subscription in subscriptions {
                    group.addTask { try await collectAll(subscription).map(\.count) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
        }
        for batch in 0..<20 {
            broker.publish((1...50).map { makeEvent(batch * 50 + $0) })
            await Task.yield()
        }
        broker.shutdown()
        let all = try await withTimeout(seconds: 10) { try await results.value }
        #expect(all.count == 50)
        for counts in all { #expect(counts == Array(1...1000)) }
    }
}

func collectAll(_ subscription: Subscription) async throws -> [Event] {
    var events: [Event] = []
    for try await event in subscription { events.append(event) }
    return events
}

@Suite struct BrokerSubscriberTests {
    @Test func heartbeatsWakeOnlyIdleSubscribersThatAskedForThem() async throws {
        let broker = Broker()
        let listening = broker.subscribe(kind: "sse", wantsHeartbeats: true)
        let quiet = broker.subscribe(kind: "stdout")
        broker.requestHeartbeat()
        guard case .heartbeat = try await listening.nextDelivery() else {
            Issue.record("expected a heartbeat")
            return
        }
        broker.publish(makeEvent(1))
        broker.requestHeartbeat()
        // Buffered events win over a heartbeat.
        guard case .events(let events) = try await listening.nextDelivery() else {
            Issue.record("expected events")
            return
        }
        #expect(events.map(\.id) == ["1"])
        #expect(try await quiet.nextBatch().map(\.id) == ["1"])
    }

    @Test func overflowCallbackRunsOnceAndStatisticsCountKinds() {
        let broker = Broker()
        let calls = CallCounter()
        let slow = broker.subscribe(capacity: 2, kind: "sse", onOverflow: { calls.increment() })
        let other = broker.subscribe(kind: "ndjson")
        let third = broker.subscribe(EventFilter(tables: [TableName(name: "a"), TableName(name: "b")]), kind: "sse")
        #expect(broker.statistics.subscribersByKind == ["sse": 2, "ndjson": 1])
        broker.publish((1...5).map { makeEvent($0) })
        broker.publish((6...9).map { makeEvent($0) })
        #expect(calls.count == 1)
        #expect(broker.statistics.subscribersByKind == ["sse": 1, "ndjson": 1])
        withExtendedLifetime((slow, other, third)) {}
    }

    /// A stream that overflowed reads on from the history: a row-security
    /// cohort judges its tables only while someone follows them, so the
    /// overflowed subscriber still follows them until it is cancelled.
    @Test func anOverflowedSubscriberThatReadsTheHistoryStillFollowsItsTables() {
        let broker = Broker()
        let course = TableName(name: "course"), other = TableName(name: "other")
        let catchingUp = broker.subscribe(EventFilter(tables: [course]), capacity: 2, kind: "ndjson", onOverflow: {})
        let dropped = broker.subscribe(EventFilter(tables: [other]), capacity: 2, kind: "realtime")
        broker.publish((1...3).map { makeEvent($0) } + (4...6).map { makeEvent($0, table: "other") })
        #expect(broker.statistics.subscriberCount == 0)
        #expect(broker.hasSubscribers(following: course), "the overflowed stream reads on from the history")
        #expect(!broker.hasSubscribers(following: other), "a subscriber without onOverflow ends at its overflow")
        #expect(broker.hasSubscribers)
        catchingUp.cancel()
        #expect(!broker.hasSubscribers(following: course))
        #expect(!broker.hasSubscribers)
        withExtendedLifetime(dropped) {}
    }

    @Test func predicatesFilterAtTheBroker() async throws {
        let broker = Broker()
        let evens = broker.subscribe(EventFilter(predicates: [ColumnPredicate(column: "id", comparison: .in, operand: .list(["2", "4"]))]))
        broker.publish((1...5).map { makeEvent($0) })
        broker.shutdown()
        #expect(try await collectAll(evens).map(\.id) == ["2", "4"])
    }
}

final class CallCounter: Sendable {
    private let value = Mutex(0)
    func increment() { value.withLock { $0 += 1 } }
    var count: Int { value.withLock { $0 } }
}

@Suite struct BrokerTransactionTests {
    @Test func transactionEndsAreMarkedWhileSomethingGroupsAndNotAfter() async throws {
        let broker = Broker()
        #expect(!broker.marksTransactionEnds)
        do {
            var iterator = broker.transactions(EventFilter(tables: [TableName(name: "course")])).makeAsyncIterator()
            #expect(broker.marksTransactionEnds)
            broker.publish([
                makeEvent(1, transaction: "7"), makeEvent(2, table: "student", transaction: "7").endingTransaction(),
                makeEvent(3, transaction: "8").endingTransaction(),
            ])
            let first = try await iterator.next()
            let second = try await iterator.next()
            #expect(first?.events.map(\.count) == [1])
            #expect(second?.events.map(\.count) == [3])
        }
        #expect(!broker.marksTransactionEnds, "a dropped stream no longer asks for marks")
    }
}
