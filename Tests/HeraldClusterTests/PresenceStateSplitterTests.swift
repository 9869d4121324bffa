import Herald
@testable import HeraldRealtime
@testable import HeraldCluster
import Testing

/// A member's whole presence state in parts under the NATS server's `max_payload`, and their assembly on the other side.
struct PresenceStateSplitterTests {
    let room = BroadcastHub.Topic(name: "realtime:room", isPrivate: false)
    let hall = BroadcastHub.Topic(name: "realtime:hall", isPrivate: true)

    func entry(_ key: String, bytes: Int) -> PresenceEntry {
        PresenceEntry(key: key, reference: "ref-\(key)", meta: .object(["blob": .string(String(repeating: "x", count: bytes))]))
    }

    func state(_ entries: [BroadcastHub.Topic: [PresenceEntry]], version: UInt64 = 7) -> ClusterMessage.PresenceState {
        .init(member: "b", incarnation: "i", version: version, entries: entries)
    }

    /// Twenty 3 KB metas on one topic and five on another, against 16 KB: every part fits, nothing is lost, and joined they are the state.
    @Test func aStateLargerThanTheLimitGoesInPartsThatEachFit() throws {
        let whole = state([room: (0..<20).map { entry("r\($0)", bytes: 3_000) }, hall: (0..<5).map { entry("h\($0)", bytes: 3_000) }])
        #expect(ClusterMessage.presenceState(whole).json.jsonText.utf8.count > 70_000)
        let result = PresenceStateSplitter(maximumPayload: 16_384).split(whole)
        #expect(result.omitted.isEmpty)
        #expect(result.parts.count >= 5)
        for (index, part) in result.parts.enumerated() {
            let bytes = ClusterMessage.presenceState(part).json.jsonText.utf8
            #expect(bytes.count <= 16_384, "part \(index + 1) is \(bytes.count) bytes")
            #expect(part.part == index + 1 && part.parts == result.parts.count && part.version == 7)
            // What goes on the wire reads back as the same part.
            #expect(ClusterMessage(bytes: Array(bytes)) == .presenceState(part))
        }
        var book = ClusterPresenceBook(memberTimeout: .seconds(5))
        var changes: [BroadcastHub.Topic: ClusterPresenceBook.Change] = [:]
        for part in result.parts {
            #expect(changes.isEmpty, "nothing applies before the last part")
            changes = book.receive(.presenceState(part), now: .now).changes
        }
        #expect(changes[room]?.joins == whole.entries[room])
        #expect(changes[hall]?.joins == whole.entries[hall])
        #expect(book.entries(on: room) == whole.entries[room])
    }

    @Test func aSmallStateIsOneWholeMessageAsBefore() {
        let whole = state([room: [entry("a", bytes: 10)]])
        let result = PresenceStateSplitter(maximumPayload: 1 << 20).split(whole)
        #expect(result.parts == [whole])
        #expect(!ClusterMessage.presenceState(whole).json.jsonText.contains("parts"), "a whole state reads as members before parts send it")
        #expect(PresenceStateSplitter(maximumPayload: 1 << 20).split(state([:])).parts == [state([:])], "nothing tracked: one empty state")
    }

    @Test func anEntryThatFitsNoPartIsLeftOut() {
        let big = entry("big", bytes: 20_000)
        let result = PresenceStateSplitter(maximumPayload: 16_384).split(state([room: [entry("a", bytes: 10), big]]))
        #expect(result.omitted == [big])
        #expect(result.parts.count == 1 && result.parts[0].entries[room]?.map(\.key) == ["a"])
    }

    /// A part lost in flight: nothing applies, and the next whole state does.
    @Test func aMissingPartDropsTheAssemblyUntilTheStateComesAgain() {
        let whole = state([room: (0..<10).map { entry("r\($0)", bytes: 3_000) }])
        let parts = PresenceStateSplitter(maximumPayload: 8_192).split(whole).parts
        #expect(parts.count >= 3)
        var book = ClusterPresenceBook(memberTimeout: .seconds(5))
        for part in parts where part.part != 2 {
            #expect(book.receive(.presenceState(part), now: .now).changes.isEmpty)
        }
        #expect(book.entries(on: room).isEmpty)
        var last = ClusterPresenceBook.Outcome()
        for part in parts { last = book.receive(.presenceState(part), now: .now) }
        #expect(last.changes[room]?.joins.count == 10)
    }

    /// A track is refused when its entry could not go out alone; a broadcast when it passes the limit as a cluster message.
    @Test func theBudgetRefusesWhatCouldNotFitInOneMessage() throws {
        let budget = ClusterMessageBudget(maximumPayload: 16_384, member: "member-0", incarnation: "abc")
        #expect(budget.refusal(tracking: "k", meta: .object(["blob": .string(String(repeating: "x", count: 15_000))]), on: room) == nil)
        let refusal = try #require(budget.refusal(tracking: "k", meta: .object(["blob": .string(String(repeating: "x", count: 17_000))]), on: room))
        #expect(refusal.contains("max_payload 16384"), "\(refusal)")
        let small = PhoenixMessage.push(topic: room.name, event: "broadcast", payload: .object(["payload": .string("hi")]))
        #expect(budget.refusal(broadcast: small, on: room) == nil)
        let large = PhoenixMessage.push(topic: room.name, event: "broadcast", payload: .object(["payload": .string(String(repeating: "y", count: 16_384))]))
        #expect(budget.refusal(broadcast: large, on: room)?.contains("max_payload") == true)
    }
}

extension ClusterMessageBudget {
    func refusal(tracking key: String, meta: JSONValue, on topic: BroadcastHub.Topic) -> String? {
        refusal(tracking: PresenceEntry(key: key, meta: meta), on: topic)
    }
}
