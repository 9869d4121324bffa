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

    private func taken(_ mailbox: Mailbox, upTo limit: Int) async throws -> [String] {
        guard case .events(let events) = try await mailbox.take(upTo: limit) else { return [] }
        return events.map(\.id)
    }
}
