@testable import Herald
import Testing

@Suite struct TransactionGrouperTests {
    let course = EventFilter(tables: [TableName(name: "course")])

    @Test func anEndMarkCompletesATransactionWithoutWaitingForTheNext() {
        var grouper = TransactionGrouper(filter: .all)
        #expect(grouper.add([makeEvent(1, transaction: "7"), makeEvent(2, transaction: "7")]).isEmpty, "no end yet")
        #expect(grouper.isInsideTransaction)
        let groups = grouper.add([makeEvent(3, transaction: "7").endingTransaction()])
        #expect(groups.map(\.transactionID) == ["7"])
        #expect(groups.first?.events.map(\.id) == ["1", "2", "3"])
        #expect(groups.first?.lastEventID == "3")
        #expect(!grouper.isInsideTransaction)
    }

    @Test func anotherTransactionsEventEndsTheOneBefore() {
        var grouper = TransactionGrouper(filter: .all)
        let groups = grouper.add([makeEvent(1, transaction: "7"), makeEvent(2, transaction: "8"), makeEvent(3, transaction: "9")])
        #expect(groups.map(\.transactionID) == ["7", "8"])
        #expect(grouper.flush()?.transactionID == "9")
        #expect(grouper.flush() == nil, "a flushed transaction is not delivered twice")
    }

    @Test func theFilterKeepsItsRowsButEveryEventCountsForTheEnd() {
        var grouper = TransactionGrouper(filter: course)
        let groups = grouper.add([
            makeEvent(1, table: "student", transaction: "7"),
            makeEvent(2, table: "course", transaction: "7"),
            makeEvent(3, table: "student", transaction: "7").endingTransaction(),
            makeEvent(4, table: "student", transaction: "8").endingTransaction(),
        ])
        #expect(groups.count == 1, "a transaction with nothing the filter passes makes no group")
        #expect(groups.first?.events.map(\.id) == ["2"])
        #expect(groups.first?.lastEventID == "2", "a stream resumes after the last event it was sent")
    }

    @Test func broadcastsBelongToNoTransaction() {
        var grouper = TransactionGrouper(filter: .all)
        let groups = grouper.add([
            makeEvent(1, transaction: "7"),
            makeEvent(2, schema: EventFilter.topicSchema, operation: .broadcast, transaction: "8"),
            makeEvent(3, transaction: "7").endingTransaction(),
        ])
        #expect(groups.first?.events.map(\.id) == ["1", "3"])
    }

    @Test func aGroupRoundTripsThroughItsJSONAndItsFrame() throws {
        let group = TransactionGroup(transactionID: "7", events: [makeEvent(1, transaction: "7"), makeEvent(2, transaction: "7")])
        let json = String(decoding: group.jsonBytes, as: UTF8.self)
        #expect(json.hasPrefix(#"{"txid":"7","count":2,"events":[{"id":"1","#))
        let decoded = try TransactionGroup(payload: json)
        #expect(decoded.events.map(\.id) == ["1", "2"])
        #expect(decoded.transactionID == "7")
        let frame = String(decoding: group.serverSentEventFrame, as: UTF8.self)
        #expect(frame.hasPrefix("id: 2\nevent: transaction\ndata: {"))
        #expect(frame.hasSuffix("}\n\n"))
        #expect(!frame.dropLast(2).contains("\n\n"))
    }

    @Test func aGroupWhoseEventsNameAnotherTransactionDoesNotDecode() {
        let json = #"{"txid":"8","count":1,"events":["# + makeEvent(1, transaction: "7").jsonText + "]}"
        #expect(throws: EventDecodingError.self) { try TransactionGroup(payload: json) }
        #expect(throws: EventDecodingError.self) { try TransactionGroup(payload: #"{"txid":"8","count":0,"events":[]}"#) }
    }

    @Test func theEndMarkIsNotPartOfTheEventsIdentityAndSurvivesStamping() {
        let event = makeEvent(1)
        let ending = event.endingTransaction()
        #expect(ending == event)
        #expect(ending.endsTransaction && !event.endsTransaction)
        #expect(ending.stamped(count: 5).endsTransaction)
        #expect(ending.stamped(count: 5).jsonText == event.stamped(count: 5).jsonText)
    }
}

extension TransactionGrouperTests {
    @Test func theRestOfATransactionThatBeganBeforeTheGrouperIsLeftOut() {
        var grouper = TransactionGrouper(filter: .all)
        grouper.begin(after: "7")
        let groups = grouper.add([makeEvent(5, transaction: "7"), makeEvent(6, transaction: "7").endingTransaction(), makeEvent(7, transaction: "8").endingTransaction()])
        #expect(groups.map(\.transactionID) == ["8"])
    }
}
