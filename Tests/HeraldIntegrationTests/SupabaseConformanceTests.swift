import Foundation
import Herald
import Testing

extension IntegrationTests {
    /// The frames realtime-js (supabase-js's realtime client, packages/core/realtime-js)
    /// and supabase-swift's RealtimeV2 send, byte for byte as their source builds
    /// them, in vsn 2.0.0, their default; and what each needs back. Read from
    /// supabase-js 381bded5 and supabase-swift 52eec30c.
    @Suite
    struct SupabaseConformanceTests {
        enum Client: String, CaseIterable, CustomTestStringConvertible {
            case realtimeJS = "realtime-js"
            case supabaseSwift = "supabase-swift"

            var testDescription: String { rawValue }

            /// The join payload: realtime-js spreads its config, then adds access_token;
            /// supabase-swift encodes RealtimeJoinPayload (replication_ready, a version string).
            func join(bindings: String, presenceKey: String, token: String) -> String {
                switch self {
                case .realtimeJS:
                    #"{"config":{"broadcast":{"ack":true,"self":false},"presence":{"key":"\#(presenceKey)","enabled":true},"postgres_changes":[\#(bindings)],"private":false},"access_token":"\#(token)"}"#
                case .supabaseSwift:
                    #"{"access_token":"\#(token)","config":{"broadcast":{"ack":true,"replication_ready":false,"self":false},"postgres_changes":[\#(bindings)],"presence":{"enabled":true,"key":"\#(presenceKey)"},"private":false},"version":"realtime-swift/2.0.0"}"#
                }
            }
        }

        /// A user broadcast push (kind 3) with a JSON payload, as both clients' serializers write it.
        static func broadcastPush(joinRef: String, ref: String, topic: String, event: String, payload: String) -> [UInt8] {
            let fields = [joinRef, ref, topic, event, ""].map { Array($0.utf8) }
            return [3] + fields.map { UInt8($0.count) } + [1] + fields.flatMap { $0 } + Array(payload.utf8)
        }

        @Test(arguments: Client.allCases)
        func theClientsFramesGetWhatItNeeds(_ client: Client) async throws {
            let database = try TestDatabase.create()
            let (daemon, port, _) = try await RealtimeTests.start(database)
            let topic = "realtime:conformance"
            let bindings = #"{"event":"*","schema":"public","table":"course"},{"event":"UPDATE","schema":"public","table":"course","filter":"short_code=eq.C1"}"#
            let app = try await RealtimeTestClient(port: port, apikey: RealtimeTests.allKey, vsn: "2.0.0")
            let peer = try await RealtimeTestClient(port: port, apikey: RealtimeTests.allKey, vsn: "2.0.0")

            // phx_join: the ok reply echoes every binding with its id, in order, then `system` says it is live.
            try await app.sendRaw(#"["1","1","\#(topic)","phx_join",\#(client.join(bindings: bindings, presenceKey: "app", token: RealtimeTests.allKey))]"#)
            let reply = try await app.next(within: 10, "join reply") { $0.event == "phx_reply" && $0.ref == .string("1") }
            #expect(reply.payload["status"] == .string("ok") && reply.joinRef == .string("1"))
            guard case .array(let echoed)? = reply.payload["response"]?["postgres_changes"] else { Issue.record("no postgres_changes in \(reply.payload.jsonText)"); return }
            #expect(echoed.map { $0["event"]?.stringValue } == ["*", "UPDATE"])
            #expect(echoed.map { $0["table"]?.stringValue } == ["course", "course"])
            #expect(echoed.map { $0["filter"]?.stringValue } == [nil, "short_code=eq.C1"])
            #expect(echoed.allSatisfy { if case .number? = $0["id"] { true } else { false } }, "numeric ids: \(reply.payload.jsonText)")
            // presence.enabled: the state follows the reply.
            let state = try await app.next(within: 10, "presence_state") { $0.event == "presence_state" }
            #expect(state.payload == .object([:]) && state.ref == .null)
            let system = try await app.next(within: 10, "system") { $0.event == "system" }
            #expect(system.payload["extension"] == .string("postgres_changes") && system.payload["status"] == .string("ok"))
            #expect(system.payload["message"] == .string("Subscribed to PostgreSQL") && system.payload["channel"] == .string("conformance"))

            // A change: `ids` and `data` with the names and types both clients decode.
            try database.execute("INSERT INTO course (short_code, name) VALUES ('C1', 'Conformance')")
            let change = try #require(try await app.takeChanges(1, topic: topic).first)
            if case .array(let ids)? = change["ids"] { #expect(ids.count == 1) } else { Issue.record("no ids in \(change.jsonText)") }
            let data = try #require(change["data"])
            #expect(data["type"] == .string("INSERT") && data["schema"] == .string("public") && data["table"] == .string("course"))
            #expect(data["record"]?["short_code"] == .string("C1") && data["errors"] == .null)
            #expect(data["commit_timestamp"]?.stringValue?.hasSuffix("Z") == true)
            if case .array(let columns)? = data["columns"] { #expect(columns.first?["type"] == .string("int4")) } else { Issue.record("no columns") }

            // heartbeat on `phoenix` with a null join_ref; access_token pushes get no reply.
            try await app.sendRaw(#"[null,"2","phoenix","heartbeat",{}]"#)
            let beat = try await app.next(within: 10, "heartbeat reply") { $0.ref == .string("2") }
            #expect(beat.topic == "phoenix" && beat.payload["status"] == .string("ok"))
            try await app.sendRaw(#"["1","3","\#(topic)","access_token",{"access_token":"\#(RealtimeTests.allKey)"}]"#)

            // The peer joins to receive; a binary broadcast push from the app reaches it
            // as a broadcast, and `ack` brings the app an ok reply with the push's ref.
            try await peer.sendRaw(#"["7","7","\#(topic)","phx_join",{"config":{"broadcast":{"ack":false,"self":false},"presence":{"key":"peer","enabled":true},"postgres_changes":[],"private":false}}]"#)
            _ = try await peer.next(within: 10, "peer join") { $0.event == "phx_reply" && $0.ref == .string("7") }
            try await app.sendBinary(Self.broadcastPush(joinRef: "1", ref: "4", topic: topic, event: "cursor", payload: #"{"x":1,"y":2}"#))
            let acknowledged = try await app.next(within: 10, "broadcast ack") { $0.ref == .string("4") }
            #expect(acknowledged.event == "phx_reply" && acknowledged.payload["status"] == .string("ok"))
            let broadcast = try await peer.next(within: 10, "broadcast") { $0.event == "broadcast" }
            #expect(broadcast.payload == .object(["type": .string("broadcast"), "event": .string("cursor"), "payload": .object(["x": .number(JSONNumber(1)), "y": .number(JSONNumber(2))])]))
            #expect(broadcast.ref == .null && broadcast.joinRef == .null, "a pushed broadcast carries no refs")
            // A raw binary payload is refused with the reason.
            var raw = Self.broadcastPush(joinRef: "1", ref: "5", topic: topic, event: "blob", payload: "\u{1}\u{2}")
            raw[6] = 0
            try await app.sendBinary(raw)
            let refusedRaw = try await app.next(within: 10, "raw payload refusal") { $0.event == "phx_reply" && $0.payload["status"] == .string("error") }
            #expect(refusedRaw.payload["response"]?["reason"]?.stringValue?.contains("JSON broadcast payloads") == true)

            // track as both send it: {type: presence, event: track, payload}; the peer sees the diff.
            try await app.sendRaw(#"["1","6","\#(topic)","presence",{"type":"presence","event":"track","payload":{"online_at":"2026-11-26T10:00:00Z"}}]"#)
            let tracked = try await app.next(within: 10, "track reply") { $0.ref == .string("6") }
            #expect(tracked.payload["status"] == .string("ok"))
            let diff = try await peer.next(within: 10, "presence_diff") { $0.event == "presence_diff" }
            #expect(diff.payload["joins"]?["app"]?["metas"]?.arrayCount == 1 && diff.payload["leaves"] == .object([:]))
            #expect(diff.payload["joins"]?["app"]?["metas"]?[0]?["phx_ref"]?.stringValue != nil)

            // phx_leave: the ok reply, then phx_close (which stops the clients from rejoining).
            try await app.sendRaw(#"["1","8","\#(topic)","phx_leave",{}]"#)
            #expect(try await app.next(within: 10, "leave reply") { $0.ref == .string("8") }.payload["status"] == .string("ok"))
            let close = try await app.next(within: 10, "phx_close") { $0.event == "phx_close" }
            #expect(close.joinRef == .string("1"))
            let left = try await peer.next(within: 10, "presence leave") { $0.event == "presence_diff" }
            #expect(left.payload["leaves"]?["app"] != nil, "leaving untracks")
            await app.close()
            await peer.close()
            _ = try await daemon.stop()
        }
    }
}

extension JSONValue {
    fileprivate var arrayCount: Int? {
        if case .array(let items) = self { return items.count }
        return nil
    }

    fileprivate subscript(index: Int) -> JSONValue? {
        if case .array(let items) = self, items.indices.contains(index) { return items[index] }
        return nil
    }
}
