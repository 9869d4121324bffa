import Crypto
import Foundation
import Testing
@testable import Herald
@testable import HeraldRealtime

@Suite struct RealtimeProtocolTests {
    private func decode(_ text: String, _ framing: PhoenixFraming = .v1) throws -> PhoenixMessage {
        try framing.decode(Array(text.utf8))
    }

    private func text(_ message: PhoenixMessage, _ framing: PhoenixFraming = .v1) -> String {
        String(decoding: framing.encode(message), as: UTF8.self)
    }

    private let join = #"{"event":"phx_join","payload":{"config":{"broadcast":{"ack":false,"self":false},"presence":{"key":"","enabled":false},"private":false,"postgres_changes":[{"event":"*","schema":"public"},{"event":"INSERT","schema":"public","table":"todos","filter":"id=eq.1"}]},"access_token":"KEY"},"topic":"realtime:test","ref":"1","join_ref":"1"}"#

    @Test func bothFramingsReadTheSameMessage() throws {
        let v1 = try decode(#"{"topic":"phoenix","event":"heartbeat","payload":{},"ref":"7","join_ref":null}"#)
        let v2 = try decode(#"[null,"7","phoenix","heartbeat",{}]"#, .v2)
        #expect(v1 == v2)
        #expect(v1.ref == .string("7"))
        #expect(PhoenixFraming(vsn: nil) == .v1)
        #expect(PhoenixFraming(vsn: "2.0.0") == .v2)
        #expect(PhoenixFraming(vsn: "3.0.0") == nil)
    }

    @Test func pushesCarryANullRefInV1AndArraysInV2() {
        let push = PhoenixMessage.push(topic: "realtime:t", event: "system", payload: .object(["a": .bool(true)]))
        #expect(text(push) == #"{"topic":"realtime:t","event":"system","payload":{"a":true},"ref":null,"join_ref":null}"#)
        #expect(text(push, .v2) == #"[null,null,"realtime:t","system",{"a":true}]"#)
        let change = PhoenixFraming.v1.encodeChange(topic: Array(#""realtime:t""#.utf8), payload: Array(#"{"ids":[1]}"#.utf8))
        #expect(String(decoding: change, as: UTF8.self) == #"{"topic":"realtime:t","event":"postgres_changes","payload":{"ids":[1]},"ref":null,"join_ref":null}"#)
        let changeV2 = PhoenixFraming.v2.encodeChange(topic: Array(#""realtime:t""#.utf8), payload: Array(#"{"ids":[1]}"#.utf8))
        #expect(String(decoding: changeV2, as: UTF8.self) == #"[null,null,"realtime:t","postgres_changes",{"ids":[1]}]"#)
    }

    @Test(arguments: [
        (PhoenixFraming.v1, "not json"), (.v1, "[1,2,3,4,5]"), (.v1, #"{"topic":1,"event":"x"}"#),
        (.v2, #"{"topic":"a","event":"b"}"#), (.v2, #"[null,null,"a"]"#), (.v2, #"[{},null,"a","b",{}]"#),
    ])
    func malformedFramesAreRefused(framing: PhoenixFraming, frame: String) {
        #expect(throws: PhoenixFrameError.self) { try decode(frame, framing) }
    }

    @Test func heartbeatIsAnsweredWithItsRef() throws {
        var session = RealtimeSession()
        let actions = session.receive(try decode(#"{"topic":"phoenix","event":"heartbeat","payload":{},"ref":"3"}"#))
        guard case .send(let reply)? = actions.first else { Issue.record("no reply"); return }
        #expect(text(reply) == #"{"topic":"phoenix","event":"phx_reply","payload":{"status":"ok","response":{}},"ref":"3","join_ref":null}"#)
    }

    @Test func joinEchoesEveryBindingExactlyWithNonZeroIDs() throws {
        var session = RealtimeSession()
        let actions = session.receive(try decode(join))
        guard case .join(let accepted)? = actions.first else { Issue.record("no join: \(actions)"); return }
        #expect(accepted.accessToken == "KEY")
        #expect(accepted.channelName == "test")
        #expect(accepted.bindings.map(\.id) == [1, 2])
        #expect(text(accepted.reply) == #"{"topic":"realtime:test","event":"phx_reply","payload":{"status":"ok","response":{"postgres_changes":[{"event":"*","schema":"public","id":1},{"event":"INSERT","schema":"public","table":"todos","filter":"id=eq.1","id":2}]}},"ref":"1","join_ref":"1"}"#)
        #expect(text(accepted.systemMessage(ok: true, "Subscribed to PostgreSQL")) == #"{"topic":"realtime:test","event":"system","payload":{"channel":"test","extension":"postgres_changes","message":"Subscribed to PostgreSQL","status":"ok"},"ref":null,"join_ref":"1"}"#)
        // A second channel's bindings get ids of their own.
        let second = session.receive(try decode(join.replacing("realtime:test", with: "realtime:other")))
        guard case .join(let other)? = second.first else { Issue.record("no second join"); return }
        #expect(other.bindings.map(\.id) == [3, 4])
    }

    /// What one socket may hold is bounded before anything is built: a topic's and a presence key's length, and
    /// the filter conditions of all its bindings; a refused join leaves the socket's other channels as they were.
    @Test func aSocketsJoinsAreBoundedBeforeAnythingIsBuilt() throws {
        var session = RealtimeSession()
        func reason(_ actions: [RealtimeSession.Action]) -> String? {
            guard case .send(let reply)? = actions.last, reply.payload["status"] == .string("error") else { return nil }
            return reply.payload["response"]?["reason"]?.stringValue
        }
        let longTopic = "realtime:" + String(repeating: "t", count: RealtimeSession.maximumTopicBytes + 1)
        #expect(reason(session.receive(try decode(#"{"topic":"\#(longTopic)","event":"phx_join","payload":{},"ref":"1"}"#)))?.contains("at most 1024 bytes") == true)
        let longKey = String(repeating: "k", count: RealtimeSession.maximumPresenceKeyBytes + 1)
        #expect(reason(session.receive(try decode(#"{"topic":"realtime:a","event":"phx_join","payload":{"config":{"presence":{"key":"\#(longKey)","enabled":true}}},"ref":"1"}"#)))?.contains("presence.key") == true)

        // 32 conditions a binding: 16 bindings fill the socket's budget, and one more condition is refused.
        let conditions = (0..<32).map { "c\($0)=like.%25_Z" }.joined(separator: ",")
        let binding = #"{"event":"*","schema":"public","table":"t","filter":"\#(conditions)"}"#
        func join(_ topic: String, bindings: Int, extra: String = "") throws -> [RealtimeSession.Action] {
            let list = (Array(repeating: binding, count: bindings) + (extra.isEmpty ? [] : [extra])).joined(separator: ",")
            return session.receive(try decode(#"{"topic":"realtime:\#(topic)","event":"phx_join","payload":{"config":{"postgres_changes":[\#(list)]}},"ref":"1"}"#))
        }
        for channel in 0..<(RealtimeSession.maximumConditions / 32) {
            guard case .join? = try join("full-\(channel)", bindings: 1).first else { Issue.record("join \(channel) refused"); return }
        }
        let refused = try join("one-more", bindings: 0, extra: #"{"event":"*","schema":"public","table":"t","filter":"id=eq.1"}"#)
        #expect(reason(refused)?.contains("it holds 512, and this join adds 1") == true, "\(refused)")
        #expect(session.joined["realtime:one-more"] == nil)
        // A long like pattern counts for what it costs: 1,000 characters are 16 machine words a character.
        let long = #"{"event":"*","schema":"public","table":"t","filter":"title=like.%25\#(String(repeating: "a", count: 1000))b%25"}"#
        #expect(reason(try join("long", bindings: 0, extra: long))?.contains("this join adds 16") == true)
        // Leaving gives the conditions back; a channel joined again replaces its own.
        _ = session.receive(try decode(#"{"topic":"realtime:full-0","event":"phx_leave","payload":{},"ref":"2"}"#))
        guard case .join? = try join("one-more", bindings: 0, extra: #"{"event":"*","schema":"public","table":"t","filter":"id=eq.1"}"#).first else { Issue.record("refused after a leave"); return }
        guard case .leave? = try join("full-1", bindings: 0).first else { Issue.record("the second join did not replace the first"); return }
        guard case .join? = try join("full-0", bindings: 1).first else { Issue.record("refused after a channel was replaced"); return }
    }

    @Test func joinWithoutBindingsRepliesWithAnEmptyList() throws {
        var session = RealtimeSession()
        let actions = session.receive(try decode(#"["1","1","realtime:x","phx_join",{"config":{}}]"#, .v2))
        guard case .join(let accepted)? = actions.first else { Issue.record("no join"); return }
        #expect(text(accepted.reply, .v2) == #"["1","1","realtime:x","phx_reply",{"status":"ok","response":{"postgres_changes":[]}}]"#)
    }

    @Test(arguments: [
        #"{"topic":"room:1","event":"phx_join","payload":{},"ref":"1"}"#,
        #"{"topic":"realtime:a","event":"phx_join","payload":{"config":{"postgres_changes":{}}},"ref":"1"}"#,
        #"{"topic":"realtime:a","event":"phx_join","payload":{"config":{"postgres_changes":[{"event":"*"}]}},"ref":"1"}"#,
        #"{"topic":"realtime:a","event":"phx_join","payload":{"config":{"postgres_changes":[{"event":"MERGE","schema":"public"}]}},"ref":"1"}"#,
        #"{"topic":"realtime:a","event":"phx_join","payload":{"config":{"postgres_changes":[{"event":"*","schema":"public","table":7}]}},"ref":"1"}"#,
    ])
    func badJoinsGetAnErrorReply(frame: String) throws {
        var session = RealtimeSession()
        let actions = session.receive(try decode(frame))
        guard case .send(let reply)? = actions.last else { Issue.record("no reply: \(actions)"); return }
        #expect(reply.event == "phx_reply")
        #expect(reply.payload["status"] == .string("error"))
        #expect(reply.payload["response"]?["reason"]?.stringValue?.isEmpty == false)
        #expect(session.joined.isEmpty)
    }

    @Test func leaveRepliesThenCloses() throws {
        var session = RealtimeSession()
        _ = session.receive(try decode(join))
        let actions = session.receive(try decode(#"{"event":"phx_leave","payload":{},"topic":"realtime:test","ref":"2","join_ref":"1"}"#))
        #expect(actions.count == 3)
        #expect(actions.first == .leave(topic: "realtime:test"))
        guard case .send(let reply) = actions[1], case .send(let close) = actions[2] else { Issue.record("\(actions)"); return }
        #expect(text(reply) == #"{"topic":"realtime:test","event":"phx_reply","payload":{"status":"ok","response":{}},"ref":"2","join_ref":"1"}"#)
        #expect(text(close) == #"{"topic":"realtime:test","event":"phx_close","payload":{},"ref":null,"join_ref":"1"}"#)
        #expect(session.joined.isEmpty)
    }

    @Test func tokenPushesGetNoReplyAndUnknownEventsGetAnError() throws {
        var session = RealtimeSession()
        _ = session.receive(try decode(join))
        let refresh = session.receive(try decode(#"{"event":"access_token","payload":{"access_token":"NEW"},"topic":"realtime:test","ref":"3"}"#))
        #expect(refresh == [.refreshToken(topic: "realtime:test", token: "NEW")])
        for event in ["broadcast", "presence", "whatever"] {
            let actions = session.receive(try decode(#"{"event":"\#(event)","payload":{},"topic":"realtime:test","ref":"4"}"#))
            guard case .send(let reply)? = actions.first else { Issue.record("no reply to \(event)"); return }
            #expect(reply.payload["status"] == .string("error"))
        }
        let unmatched = session.receive(try decode(#"{"event":"broadcast","payload":{},"topic":"realtime:nope","ref":"5"}"#))
        guard case .send(let reply)? = unmatched.first else { Issue.record("no reply"); return }
        #expect(reply.payload["response"]?["reason"] == .string("unmatched topic"))
        #expect(session.joined.keys.sorted() == ["realtime:test"])
    }

    @Test func aBroadcastGoesToTheTopicWithAnAcknowledgementWhenTheJoinAskedForOne() throws {
        var session = RealtimeSession()
        guard case .join(let quiet)? = session.receive(try decode(join)).last else { Issue.record("no join"); return }
        #expect(quiet.broadcast == .init(echo: false, acknowledge: false) && !quiet.isPrivate)
        let sent = #"{"event":"broadcast","payload":{"type":"broadcast","event":"cursor","payload":{"x":1}},"topic":"realtime:test","ref":"6","join_ref":"1"}"#
        guard case .broadcast(let unacknowledged)? = session.receive(try decode(sent)).first else { Issue.record("no broadcast"); return }
        #expect(unacknowledged.acknowledgement == nil)
        #expect(text(unacknowledged.message) == #"{"topic":"realtime:test","event":"broadcast","payload":{"type":"broadcast","event":"cursor","payload":{"x":1}},"ref":null,"join_ref":null}"#)

        let loud = join.replacingOccurrences(of: #""broadcast":{"ack":false,"self":false}"#, with: #""broadcast":{"ack":true,"self":true}"#)
            .replacingOccurrences(of: #""private":false"#, with: #""private":true"#)
        guard case .join(let acknowledging)? = session.receive(try decode(loud)).last else { Issue.record("no join"); return }
        #expect(acknowledging.broadcast == .init(echo: true, acknowledge: true) && acknowledging.isPrivate)
        guard case .broadcast(let acknowledged)? = session.receive(try decode(sent)).first else { Issue.record("no broadcast"); return }
        #expect(acknowledged.acknowledgement.map { text($0) } == #"{"topic":"realtime:test","event":"phx_reply","payload":{"status":"ok","response":{}},"ref":"6","join_ref":"1"}"#)
    }

    @Test func presenceTracksAndUntracksWithTheJoinsKey() throws {
        var session = RealtimeSession()
        let keyed = join.replacingOccurrences(of: #""presence":{"key":"","enabled":false}"#, with: #""presence":{"key":"alice","enabled":true}"#)
        guard case .join(let joined)? = session.receive(try decode(keyed)).last else { Issue.record("no join"); return }
        #expect(joined.presence == .init(key: "alice", enabled: true))
        let track = session.receive(try decode(#"{"event":"presence","payload":{"type":"presence","event":"track","payload":{"mood":"fine"}},"topic":"realtime:test","ref":"7","join_ref":"1"}"#))
        guard case .presence(let topic, let meta, let reply)? = track.first else { Issue.record("no presence"); return }
        #expect(topic == "realtime:test" && meta?["mood"] == .string("fine"))
        #expect(reply.payload["status"] == .string("ok") && reply.ref == .string("7"))
        let untrack = session.receive(try decode(#"{"event":"presence","payload":{"event":"untrack"},"topic":"realtime:test","ref":"8"}"#))
        guard case .presence(_, nil, _)? = untrack.first else { Issue.record("no untrack"); return }
        let wrong = session.receive(try decode(#"{"event":"presence","payload":{"event":"track","payload":[1]},"topic":"realtime:test","ref":"9"}"#))
        guard case .send(let refusal)? = wrong.first else { Issue.record("no refusal"); return }
        #expect(refusal.payload["status"] == .string("error"))
    }

    /// A vsn 2.0.0 user broadcast push, as realtime-js and supabase-swift write it, with metadata.
    @Test func aBinaryBroadcastPushReadsAsTheBroadcastATextFrameCarries() throws {
        let fields = ["1", "2", "realtime:room", "cursor", #"{"user":"u1"}"#].map { Array($0.utf8) }
        let frame: [UInt8] = [3] + fields.map { UInt8($0.count) } + [1] + fields.flatMap { $0 } + Array(#"{"x":1}"#.utf8)
        let message = try PhoenixFraming.v2.decodeBinary(frame)
        #expect(message.topic == "realtime:room" && message.event == "broadcast" && message.joinRef == .string("1") && message.ref == .string("2"))
        #expect(text(message, .v2) == #"["1","2","realtime:room","broadcast",{"type":"broadcast","event":"cursor","payload":{"x":1},"meta":{"user":"u1"}}]"#)
        for (bytes, reason) in [(frame, "1.0.0"), ([3, 0, 0], "kind 3"), (Array(frame.prefix(12)), "shorter"), ([4] + frame.dropFirst(), "kind 3")] {
            let framing: PhoenixFraming = reason == "1.0.0" ? .v1 : .v2
            #expect(throws: PhoenixFrameError.self, "\(reason)") { try framing.decodeBinary(bytes) }
        }
    }

    @Test func aBroadcasterIsLimitedInSizeAndRate() {
        var limiter = BroadcastLimiter(maximumBytes: 10, maximumPerSecond: 3)
        let start = ContinuousClock.now
        #expect(limiter.admit(bytes: 11, now: start)?.contains("realtime.broadcast.max_bytes") == true)
        for offset in 0..<3 { #expect(limiter.admit(bytes: 10, now: start + .milliseconds(offset * 100)) == nil) }
        #expect(limiter.admit(bytes: 1, now: start + .milliseconds(900))?.contains("rate limited") == true)
        #expect(limiter.admit(bytes: 1, now: start + .milliseconds(1000)) == nil, "a new second")
    }

    @Test func rejoiningATopicReplacesIt() throws {
        var session = RealtimeSession()
        _ = session.receive(try decode(join))
        let actions = session.receive(try decode(join))
        #expect(actions.first == .leave(topic: "realtime:test"))
        guard case .join = actions.last else { Issue.record("no join"); return }
    }

    @Test func bindingsBecomeFilters() throws {
        var session = RealtimeSession()
        guard case .join(let accepted)? = session.receive(try decode(join)).first else { return }
        let schemaWide = try accepted.bindings[0].eventFilter()
        #expect(schemaWide.schemas == ["public"] && schemaWide.tables == nil && schemaWide.operations == [.insert, .update, .delete])
        let table = try accepted.bindings[1].eventFilter()
        #expect(table.tables == [TableName(name: "todos")] && table.operations == .insert)
        #expect(table.predicates == [ColumnPredicate(column: "id", comparison: .eq, operand: .value("1"))])
    }

    @Test func changeDataHasEveryFieldSupabaseClientsRead() {
        let update = Event(
            id: "9", operation: .update, table: TableName(name: "todos"),
            new: ["id": .number(JSONNumber(1)), "tags": .array([.number(JSONNumber(1))])],
            old: ["id": .number(JSONNumber(1)), "tags": .array([])],
            transactionID: "5", at: "2026-11-21T12:16:13.213456Z"
        )
        let columns = [RealtimeColumn(name: "id", type: "int8"), RealtimeColumn(name: "tags", type: "_int4")]
        let data = String(decoding: ChangePayload.data(update, columns: columns), as: UTF8.self)
        #expect(data == #"{"schema":"public","table":"todos","commit_timestamp":"2026-11-21T12:16:13.213Z","type":"UPDATE","columns":[{"name":"id","type":"int8"},{"name":"tags","type":"_int4"}],"record":{"id":1,"tags":[1]},"old_record":{"id":1,"tags":[]},"errors":null}"#)
        let insert = String(decoding: ChangePayload.data(makeEvent(1), columns: []), as: UTF8.self)
        #expect(insert.contains(#""record":{"id":1}"#) && !insert.contains("old_record"))
        let delete = String(decoding: ChangePayload.data(makeEvent(1, operation: .delete), columns: []), as: UTF8.self)
        #expect(delete.contains(#""old_record":{"id":1}"#) && !delete.contains(#""record""#))
        #expect(!ChangePayload.carries(makeEvent(1, operation: .truncate)))
        #expect(String(decoding: ChangePayload.payload(ids: [3, 7], data: Array("{}".utf8)), as: UTF8.self) == #"{"ids":[3,7],"data":{}}"#)
        #expect(ChangePayload.commitTimestamp("2026-11-21T12:16:13Z") == "2026-11-21T12:16:13.000Z")
    }
}
