import Herald
@testable import HeraldCluster
@testable import HeraldNATSOutput
@testable import HeraldRealtime
import Testing

/// The receiving half of cluster presence, without NATS: versions, gaps, restarts and silence.
struct ClusterPresenceBookTests {
    let room = BroadcastHub.Topic(name: "realtime:room", isPrivate: false)
    let start = ContinuousClock.now

    func entry(_ key: String, _ reference: String) -> PresenceEntry {
        PresenceEntry(key: key, reference: reference, meta: .object(["name": .string(key)]))
    }

    func heartbeat(_ member: String, incarnation: String = "a", version: UInt64) -> ClusterMessage {
        .heartbeat(.init(member: member, incarnation: incarnation, version: version, role: "database", lastEventID: nil, channels: 0))
    }

    func diff(_ member: String, incarnation: String = "a", _ version: UInt64, joins: [PresenceEntry] = [], leaves: [PresenceEntry] = []) -> ClusterMessage {
        .presenceDiff(.init(member: member, incarnation: incarnation, version: version, topic: room, joins: joins, leaves: leaves))
    }

    @Test func aMemberThatNeverTrackedNeedsNoStateAndOneThatDidIsAskedOnce() {
        var book = ClusterPresenceBook(memberTimeout: .seconds(5))
        #expect(book.receive(heartbeat("b", version: 0), now: start) == .init())
        let asked = book.receive(heartbeat("c", version: 3), now: start)
        #expect(asked.requestState == "c")
        #expect(book.receive(heartbeat("c", version: 3), now: start + .milliseconds(200)).requestState == nil, "at most one request a second")
        #expect(book.receive(heartbeat("c", version: 3), now: start + .seconds(2)).requestState == "c")
    }

    @Test func diffsApplyInOrderAndAGapAsksForTheWholeState() {
        var book = ClusterPresenceBook(memberTimeout: .seconds(5))
        _ = book.receive(heartbeat("b", version: 0), now: start)
        let joined = book.receive(diff("b", 1, joins: [entry("alice", "r1")]), now: start)
        #expect(joined.changes[room] == .init(joins: [entry("alice", "r1")]))
        #expect(book.receive(diff("b", 1, joins: [entry("alice", "r1")]), now: start).changes.isEmpty, "a repeat changes nothing")
        let gap = book.receive(diff("b", 3, joins: [entry("carol", "r3")]), now: start)
        #expect(gap.requestState == "b" && gap.changes.isEmpty)
        let state = ClusterMessage.presenceState(.init(member: "b", incarnation: "a", version: 3, entries: [room: [entry("bob", "r2"), entry("carol", "r3")]]))
        let replaced = book.receive(state, now: start)
        #expect(replaced.changes[room] == .init(joins: [entry("bob", "r2"), entry("carol", "r3")], leaves: [entry("alice", "r1")]))
        #expect(book.entries(on: room).map(\.key) == ["bob", "carol"])
        let older = ClusterMessage.presenceState(.init(member: "b", incarnation: "a", version: 2, entries: [:]))
        #expect(book.receive(older, now: start).changes.isEmpty, "an older state is ignored")
        let left = book.receive(diff("b", 4, leaves: [entry("bob", "r2")]), now: start)
        #expect(left.changes[room] == .init(leaves: [entry("bob", "r2")]))
        #expect(book.entries(on: room).map(\.key) == ["carol"])
    }

    @Test func aRestartedMemberLosesWhatItTrackedBefore() {
        var book = ClusterPresenceBook(memberTimeout: .seconds(5))
        _ = book.receive(heartbeat("b", version: 0), now: start)
        _ = book.receive(diff("b", 1, joins: [entry("alice", "r1")]), now: start)
        let restarted = book.receive(heartbeat("b", incarnation: "z", version: 2), now: start)
        #expect(restarted.changes[room] == .init(leaves: [entry("alice", "r1")]))
        #expect(restarted.requestState == "b")
        #expect(book.entries(on: room).isEmpty)
    }

    @Test func aSilentMemberLeavesWithItsEntriesAfterTheTimeout() {
        var book = ClusterPresenceBook(memberTimeout: .seconds(5))
        _ = book.receive(heartbeat("b", version: 0), now: start)
        _ = book.receive(diff("b", 1, joins: [entry("alice", "r1")]), now: start)
        _ = book.receive(heartbeat("c", version: 0), now: start + .seconds(4))
        #expect(book.expire(now: start + .seconds(5)).members.isEmpty)
        let expired = book.expire(now: start + .seconds(6))
        #expect(expired.members == ["b"])
        #expect(expired.outcome.changes[room] == .init(leaves: [entry("alice", "r1")]))
        #expect(book.members.keys.sorted() == ["c"])
    }

    @Test func everyMessageSurvivesItsJSON() throws {
        let messages: [ClusterMessage] = [
            heartbeat("b", version: 7),
            .heartbeat(.init(member: "b", incarnation: "x", version: 0, role: "database", lastEventID: "42", channels: 3)),
            diff("b", 2, joins: [entry("alice", "r1")], leaves: [entry("bob", "r2")]),
            .presenceState(.init(member: "b", incarnation: "a", version: 9, entries: [
                room: [entry("alice", "r1")], .init(name: "realtime:room", isPrivate: true): [entry("carol", "r3")],
            ])),
            .stateRequest(member: "b", requester: "c"),
            .resumePosition(member: "b", key: ResumeBook.Key(caller: "all", topic: "realtime:school", encodedBindings: "{\"event\":\"*\"}"), eventID: "42"),
            .broadcast(.init(member: "b", topic: room, message: .push(topic: room.name, event: "broadcast", payload: .object([
                "type": .string("broadcast"), "event": .string("hello"), "payload": .object(["n": .number(JSONNumber(1))]),
            ])))),
        ]
        for message in messages {
            #expect(ClusterMessage(bytes: Array(message.json.jsonText.utf8)) == message)
        }
        #expect(ClusterMessage(bytes: Array(#"{"type":"vote","member":"b"}"#.utf8)) == nil, "a type this version does not know is skipped")
    }
}

/// Servers in turn, with backoff that starts again after progress.
struct NATSServerRotationTests {
    @Test func eachServerInTurnAndTheBackoffStartsAgainAfterProgress() {
        let policy = BackoffPolicy(initialDelay: .milliseconds(250), maximumDelay: .seconds(10))
        var rotation = NATSServerRotation(servers: [.init(host: "127.0.0.1", port: 1), .init(host: "127.0.0.1", port: 2)], backoff: policy)
        #expect(rotation.current.port == 1)
        let first = rotation.ended(afterProgress: false, random: 0.5)
        #expect(rotation.current.port == 2 && rotation.attempt == 1)
        let second = rotation.ended(afterProgress: false, random: 0.5)
        #expect(rotation.current.port == 1 && rotation.attempt == 2 && second > first)
        #expect(rotation.ended(afterProgress: true, random: 0.5) == first, "a connection that made progress starts the backoff again")
        #expect(rotation.attempt == 1)
    }
}
