import Testing
@testable import Herald

@Suite struct EventFilterTests {
    @Test func emptyFilterMatchesEveryRowChangeAndNoBroadcast() {
        for operation in Operation.allCases where operation != .broadcast {
            #expect(EventFilter.all.matches(makeEvent(1, table: "x", schema: "y", operation: operation)))
        }
        #expect(!EventFilter.all.matches(makeEvent(1, table: "room-1", schema: "realtime", operation: .broadcast)))
        #expect(EventFilter.topics(["room-1"]).matches(makeEvent(1, table: "room-1", schema: "realtime", operation: .broadcast)))
        #expect(!EventFilter.topics(["room-2"]).matches(makeEvent(1, table: "room-1", schema: "realtime", operation: .broadcast)))
        #expect(!EventFilter.topics(["room-1"]).matches(makeEvent(1, table: "room-1", schema: "realtime", operation: .insert)))
    }

    @Test func conditionsCombineWithAnd() {
        let filter = EventFilter(
            tables: [TableName(name: "course"), TableName(schema: "school", name: "student")],
            schemas: ["public"],
            operations: [.insert, .delete]
        )
        #expect(filter.matches(makeEvent(1, table: "course", operation: .insert)))
        #expect(filter.matches(makeEvent(1, table: "course", operation: .delete)))
        #expect(!filter.matches(makeEvent(1, table: "course", operation: .update)))
        #expect(!filter.matches(makeEvent(1, table: "enrols_in", operation: .insert)))
        // Named table, but its schema is not in the schema list.
        #expect(!filter.matches(makeEvent(1, table: "student", schema: "school", operation: .insert)))
    }

    @Test func schemaOnlyFilter() {
        let filter = EventFilter(schemas: ["audit"])
        #expect(filter.matches(makeEvent(1, table: "log", schema: "audit")))
        #expect(!filter.matches(makeEvent(1, table: "log", schema: "public")))
    }
}
