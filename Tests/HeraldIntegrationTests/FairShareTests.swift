import AsyncHTTPClient
import Foundation
import Herald
import NIOCore
import Testing

extension IntegrationTests {
    /// One client, with a key or without one, against the daemon's budgets:
    /// each test repeats what the second attack did, bounded in count and
    /// time, and a bystander's delivery is checked while it runs.
    @Suite
    struct FairShareTests {
        /// 900 KB beside a small payload, or in the event's name, was delivered as a 900 KB frame to every member.
        @Test func aBroadcastIsMeasuredWhole() async throws {
            let database = try TestDatabase.create()
            let (daemon, port, _) = try await RealtimeTests.start(database)
            let join = #"{"config":{"broadcast":{"ack":true,"self":false},"presence":{"key":"","enabled":false},"private":false,"postgres_changes":[]}}"#
            let sender = try await RealtimeTestClient(port: port, apikey: RealtimeTests.allKey)
            let bystander = try await RealtimeTestClient(port: port, apikey: RealtimeTests.allKey)
            for (client, ref) in [(sender, "1"), (bystander, "2")] {
                try await client.send(joinRef: ref, ref: ref, topic: "realtime:lobby", event: "phx_join", payload: join)
                _ = try await client.next(within: 10, "join reply") { $0.event == "phx_reply" && $0.ref == .string(ref) }
            }
            let bulk = String(repeating: "x", count: 70_000)
            let oversized = [
                #"{"type":"broadcast","event":"e","payload":{"n":1},"beside":"\#(bulk)"}"#,
                #"{"type":"broadcast","event":"\#(bulk)","payload":{"n":2}}"#,
            ]
            for (index, payload) in oversized.enumerated() {
                let ref = "big\(index)"
                try await sender.send(joinRef: "1", ref: ref, topic: "realtime:lobby", event: "broadcast", payload: payload)
                let reply = try await sender.next(within: 10, "the refusal of \(ref)") { $0.event == "phx_reply" && $0.ref == .string(ref) }
                #expect(reply.payload["response"]?["reason"]?.stringValue?.contains("realtime.broadcast.max_bytes") == true, "\(reply.payload.jsonText.prefix(300))")
            }
            try await sender.send(joinRef: "1", ref: "small", topic: "realtime:lobby", event: "broadcast", payload: #"{"type":"broadcast","event":"e","payload":{"n":3}}"#)
            let heard = try await bystander.next(within: 10, "the small broadcast") { $0.event == "broadcast" }
            #expect(heard.payload["payload"]?["n"] == .number(JSONNumber(3)), "only the small one reaches the bystander: \(heard.payload.jsonText.prefix(300))")

            // Over REST, the event's name counts with the payload: 413, with the limit named.
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/realtime/v1/api/broadcast")
            request.method = .POST
            request.headers.add(name: "apikey", value: RealtimeTests.allKey)
            request.body = .bytes(ByteBuffer(string: #"{"messages":[{"topic":"lobby","event":"\#(String(repeating: "e", count: 66_000))","payload":{}}]}"#))
            let response = try await TestHTTP.client.execute(request, timeout: .seconds(10))
            let body = String(buffer: try await response.body.collect(upTo: 1 << 20))
            #expect(response.status.code == 413 && body.contains("realtime.broadcast.max_bytes"), "\(response.status): \(body)")
            try await Task.sleep(for: .milliseconds(200))
            #expect(bystander.unreadMessages.filter { $0.event == "broadcast" }.isEmpty, "nothing oversized reached the bystander")
            await sender.close()
            await bystander.close()
            _ = try await daemon.stop()
        }
    }
}
