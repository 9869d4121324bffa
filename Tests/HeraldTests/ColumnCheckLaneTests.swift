import Foundation
import Glibc
@testable import Herald
import Testing

@Suite struct ColumnCheckLaneTests {
    /// A row whose `title` a `like` of `%`, 280 `_` and `Z` takes long to judge.
    static func longRow(_ id: Int, ending: String = "") -> Event {
        let row: JSONObject = ["id": .number(JSONNumber(Int64(id))), "title": .string(String(repeating: "a", count: 20_000) + ending)]
        return Event(
            id: String(id), operation: .insert, table: TableName(schema: "public", name: "course"),
            primaryKey: ["id": .number(JSONNumber(Int64(id)))], new: row, old: nil, transactionID: "1", at: "2026-11-30T02:00:00.000000Z"
        )
    }

    static let costlyFilter = EventFilter(predicates: [
        ColumnPredicate(column: "title", comparison: .like, operand: .value("%" + String(repeating: "_", count: 280) + "Z")),
    ])
    static let cheapFilter = EventFilter(predicates: [ColumnPredicate(column: "id", comparison: .eq, operand: .value("1"))])

    private static func niceness() -> Int32 {
        getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
    }

    @Test func theLaneRunsBelowTheThreadsThatDeliver() async throws {
        let lane = await ColumnCheckLane.shared.run { Self.niceness() }
        #expect(lane == 10)
        #expect(Self.niceness() == 0, "only the lane's thread is lowered")
        // Named, so that an operator can tell it in `top -H` from the threads that deliver.
        let name = await ColumnCheckLane.shared.run { try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8) }
        #expect(name == "costly-checks\n")
    }

    @Test func aLikeOverLongRowsGoesToTheLaneAndAnEqualityOverShortOnesStays() throws {
        let broker = Broker()
        let costly = broker.subscribe(Self.costlyFilter)
        broker.publish([Self.longRow(1), Self.longRow(2)])
        // A pattern may cost much: its checks start on the lane, before anything is measured.
        #expect(costly.checksAreCostly)
        guard case .events(let unchecked)? = try costly.pollUnchecked() else { Issue.record("nothing to check"); return }
        #expect(unchecked.count == 1, "one event at a time while the cost is unknown")
        #expect(costly.passingColumns(unchecked).isEmpty)
        #expect(costly.checksAreCostly, "a like over 20,000 characters")

        let shortRows = Broker()
        let cheap = shortRows.subscribe(Self.cheapFilter)
        shortRows.publish((1...200).map { makeEvent($0) })
        var passed: [String] = []
        while case .events(let events)? = try cheap.pollDelivery() { passed += events.map(\.id) }
        #expect(passed == ["1"])
        #expect(!cheap.checksAreCostly)
    }

    @Test func aPatternThatProvesCheapComesBackFromTheLane() throws {
        let broker = Broker()
        let short = broker.subscribe(EventFilter(predicates: [ColumnPredicate(column: "id", comparison: .like, operand: .value("1%"))]))
        broker.publish((1...200).map { makeEvent($0) })
        #expect(short.checksAreCostly)
        var passed: [String] = []
        while case .events(let unchecked)? = try short.pollUnchecked() { passed += short.passingColumns(unchecked).map(\.id) }
        #expect(passed.count == 111 && passed.first == "1")
        #expect(!short.checksAreCostly, "a short pattern over short values")
    }

    @Test func aTaskConsumerGetsWhatItsCostlyChecksPass() async throws {
        let broker = Broker()
        let costly = broker.subscribe(Self.costlyFilter)
        broker.publish(Self.longRow(1))
        let consumer = Task { try await costly.nextBatch().map(\.id) }
        // The first check shows the cost; what comes after it is judged on the lane.
        try await Task.sleep(for: .milliseconds(200))
        broker.publish(Self.longRow(2, ending: "Z"))
        #expect(try await consumer.value == ["2"])
        #expect(costly.checksAreCostly)
    }
}
