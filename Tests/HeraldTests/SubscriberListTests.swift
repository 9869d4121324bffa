import Testing
@testable import Herald

@Suite struct SubscriberListTests {
    private func subscriber(_ id: UInt64) -> Broker.Subscriber {
        Broker.Subscriber(id: id, filter: .all, mailbox: Mailbox(capacity: 1), kind: "test", onOverflow: nil)
    }

    @Test func removingOneKeepsEveryOtherFindable() {
        var list = Broker.SubscriberList()
        for id in 1...5 { list.insert(subscriber(UInt64(id))) }
        #expect(list.remove(id: 2)?.id == 2)
        #expect(list.remove(id: 2) == nil)
        #expect(Set(list.members.map(\.id)) == [1, 3, 4, 5])
        // 5 moved into 2's place; it must still be removable by id.
        #expect(list.remove(id: 5)?.id == 5)
        #expect(list.remove(id: 1)?.id == 1)
        #expect(list.remove(id: 4)?.id == 4)
        #expect(list.remove(id: 3)?.id == 3)
        #expect(list.isEmpty)
        #expect(list.remove(id: 9) == nil)
    }
}
