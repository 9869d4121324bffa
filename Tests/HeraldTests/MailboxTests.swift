import Synchronization
import Testing
@testable import Herald

@Suite struct MailboxTests {
    @Test func batchesComeOutInOrderSplitAndJoinedAtTheLimit() async throws {
        let mailbox = Mailbox(capacity: 100)
        let events = (1...6).map { makeEvent($0) }
        #expect(mailbox.offer(Array(events[0..<3])) == .accepted)
        #expect(mailbox.offer(Array(events[3..<5])) == .accepted)
        #expect(mailbox.offer([events[5]]) == .accepted)
        #expect(try await taken(mailbox, upTo: 2) == ["1", "2"])
        #expect(try await taken(mailbox, upTo: 2) == ["3", "4"])
        #expect(try await taken(mailbox, upTo: 10) == ["5", "6"])
    }

    @Test func aBatchTakenWholeIsTheOfferedArray() async throws {
        let mailbox = Mailbox(capacity: 100)
        let batch = (1...3).map { makeEvent($0) }
        _ = mailbox.offer(batch)
        guard case .events(let events) = try await mailbox.take(upTo: 10) else {
            Issue.record("expected events")
            return
        }
        #expect(events.withUnsafeBufferPointer { $0.baseAddress } == batch.withUnsafeBufferPointer { $0.baseAddress })
    }

    @Test func anOverflowKeepsWhatFitsThenThrows() async throws {
        let mailbox = Mailbox(capacity: 4)
        let events = (1...5).map { makeEvent($0) }
        #expect(mailbox.offer(Array(events[0..<3])) == .accepted)
        #expect(mailbox.offer(Array(events[3..<5])) == .overflowed)
        #expect(mailbox.offer([makeEvent(6)]) == .closed)
        #expect(try await taken(mailbox, upTo: 10) == ["1", "2", "3", "4"])
        await #expect(throws: SubscriptionOverflowError(capacity: 4)) { try await mailbox.take(upTo: 10) }
    }

    @Test func aCallbackConsumerIsWokenOnceWhenThereIsSomethingToPoll() throws {
        let mailbox = Mailbox(capacity: 10, wantsHeartbeats: true)
        #expect(try mailbox.poll(upTo: 10) == nil)
        let wakes = Mutex(0)
        mailbox.whenReady { wakes.withLock { $0 += 1 } }
        #expect(wakes.withLock { $0 } == 0, "woken with nothing to take")
        _ = mailbox.offer([makeEvent(1)])
        _ = mailbox.offer([makeEvent(2)])
        #expect(wakes.withLock { $0 } == 1)
        guard case .events(let events)? = try mailbox.poll(upTo: 10) else {
            Issue.record("expected events")
            return
        }
        #expect(events.map(\.id) == ["1", "2"])
        // Registered while something waits: called at once.
        mailbox.requestHeartbeat()
        mailbox.whenReady { wakes.withLock { $0 += 1 } }
        #expect(wakes.withLock { $0 } == 2)
        guard case .heartbeat? = try mailbox.poll(upTo: 10) else {
            Issue.record("expected a heartbeat")
            return
        }
        mailbox.whenReady { wakes.withLock { $0 += 1 } }
        mailbox.finish()
        #expect(wakes.withLock { $0 } == 3)
        guard case .finished? = try mailbox.poll(upTo: 10) else {
            Issue.record("expected the end")
            return
        }
    }

    @Test func pollingAnOverflowedMailboxThrowsAfterWhatFit() throws {
        let mailbox = Mailbox(capacity: 1)
        #expect(mailbox.offer([makeEvent(1), makeEvent(2)]) == .overflowed)
        guard case .events(let events)? = try mailbox.poll(upTo: 10) else {
            Issue.record("expected events")
            return
        }
        #expect(events.map(\.id) == ["1"])
        #expect(throws: SubscriptionOverflowError(capacity: 1)) { try mailbox.poll(upTo: 10) }
    }

    /// A subscriber that does not read held 4,096 events whatever their size: 1 MB rows made 4 GB.
    @Test func bytesBoundTheMailboxAsEventsDoButOneEventAlwaysFits() async throws {
        let size = makeEvent(1).retainedBytes
        let mailbox = Mailbox(capacity: 100, byteCapacity: size * 3)
        #expect(mailbox.offer([makeEvent(1), makeEvent(2)]) == .accepted)
        #expect(mailbox.offer([makeEvent(3), makeEvent(4)]) == .overflowed)
        #expect(try await taken(mailbox, upTo: 10) == ["1", "2", "3"])
        await #expect(throws: SubscriptionOverflowError.self) { try await mailbox.take(upTo: 10) }

        let small = Mailbox(capacity: 100, byteCapacity: 1)
        #expect(small.offer([makeEvent(1)]) == .accepted, "an empty mailbox takes one event of any size")
        #expect(small.offer([makeEvent(2)]) == .overflowed)
    }

    /// A batch framed for a client is bounded in bytes, so that large rows go out a few at a time.
    @Test func aTakeStopsAtItsBytesAfterTheFirstEvent() async throws {
        let size = makeEvent(1).retainedBytes
        let mailbox = Mailbox(capacity: 100)
        _ = mailbox.offer((1...5).map { makeEvent($0) })
        _ = mailbox.offer([makeEvent(6)])
        #expect(try await taken(mailbox, upTo: 10, bytes: size * 2) == ["1", "2"])
        #expect(try await taken(mailbox, upTo: 10, bytes: 1) == ["3"], "the first event goes whatever its size")
        #expect(try await taken(mailbox, upTo: 10, bytes: size * 3) == ["4", "5", "6"], "across batches")
        // What was taken is no longer counted: the mailbox holds as many bytes again.
        let refill = Mailbox(capacity: 100, byteCapacity: size * 2)
        _ = refill.offer([makeEvent(1), makeEvent(2)])
        #expect(try await taken(refill, upTo: 1) == ["1"])
        #expect(refill.offer([makeEvent(3)]) == .accepted)
        #expect(refill.offer([makeEvent(4)]) == .overflowed)
    }

    private func taken(_ mailbox: Mailbox, upTo limit: Int, bytes: Int = .max) async throws -> [String] {
        guard case .events(let events) = try await mailbox.take(upTo: limit, bytes: bytes) else { return [] }
        return events.map(\.id)
    }
}

extension Mailbox {
    /// As the broker offers: with the events' bytes added up.
    func offer(_ events: [Event]) -> OfferResult {
        offer(events, bytes: events.reduce(0) { $0 + $1.retainedBytes })
    }
}
