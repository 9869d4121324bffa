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

    private func taken(_ mailbox: Mailbox, upTo limit: Int) async throws -> [String] {
        guard case .events(let events) = try await mailbox.take(upTo: limit) else { return [] }
        return events.map(\.id)
    }
}
