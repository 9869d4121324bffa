import AsyncHTTPClient
import Foundation
import Herald
import Testing

extension IntegrationTests {
    /// Supabase Realtime's `postgres_changes` protocol over TCP on loopback,
    /// with a real WebSocket client and real writes.
    @Suite
    struct RealtimeTests {
        static let allKey = "all-0123456789abcdef"
        static let coursesKey = "courses-0123456789abcdef"
        static let jwtSecret = "super-secret-jwt-token-with-at-least-32-characters"

        /// A daemon with realtime on a random loopback port, an unrestricted
        /// key, a key that sees only `course`, and tokens whose `anon` role sees `course`.
        static func start(_ database: TestDatabase, extra: String = "") async throws -> (daemon: SocketDaemon, port: Int, config: String) {
            let directory = FileManager.default.temporaryDirectory.appending(path: "pgherald-realtime-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try jwtSecret.write(toFile: directory.appending(path: "jwt").path, atomically: true, encoding: .utf8)
            let port = freeLoopbackPort()
            let config = directory.appending(path: "pgherald.yaml").path
            try """
                realtime:
                  listen: 127.0.0.1:\(port)
                  keys:
                    all:
                      key: \(allKey)
                    courses:
                      key: \(coursesKey)
                      tables: [public.course]
                  jwt:
                    secret_file: \(directory.appending(path: "jwt").path)
                    roles:
                      anon:
                        tables: [public.course]
                \(extra)
                """.write(toFile: config, atomically: true, encoding: .utf8)
            return (try await SocketDaemon(database: database, arguments: ["--config", config]), port, config)
        }

        static func joinPayload(_ bindings: String, token: String? = nil) -> String {
            #"{"config":{"broadcast":{"ack":false,"self":false},"presence":{"key":"","enabled":false},"private":false,"postgres_changes":[\#(bindings)]}\#(token.map { #","access_token":"\#($0)""# } ?? "")}"#
        }

        /// Joins `topic` and waits for the ok reply and the `system` message; returns the binding ids.
        @discardableResult
        static func join(_ client: RealtimeTestClient, topic: String, bindings: String, token: String? = nil, ref: String = "1") async throws -> [Int] {
            try await client.send(joinRef: ref, ref: ref, topic: topic, event: "phx_join", payload: joinPayload(bindings, token: token))
            let reply = try await client.next(within: 10, "join reply") { $0.topic == topic && $0.event == "phx_reply" }
            #expect(reply.payload["status"] == .string("ok"), "\(reply.payload.jsonText)")
            #expect(reply.ref == .string(ref) && reply.joinRef == .string(ref))
            let system = try await client.next(within: 10, "system message") { $0.topic == topic && $0.event == "system" }
            #expect(system.payload["status"] == .string("ok"), "\(system.payload.jsonText)")
            #expect(system.payload["message"] == .string("Subscribed to PostgreSQL"))
            #expect(system.payload["channel"] == .string(String(topic.dropFirst("realtime:".count))))
            guard case .array(let echoed)? = reply.payload["response"]?["postgres_changes"] else { return [] }
            return echoed.compactMap { $0["id"].flatMap { if case .number(let n) = $0 { Int(n.text) } else { nil } } }
        }

        static func ids(_ change: JSONValue) -> [Int] {
            guard case .array(let items)? = change["ids"] else { return [] }
            return items.compactMap { if case .number(let n) = $0 { Int(n.text) } else { nil } }
        }

        @Test(arguments: ["1.0.0", "2.0.0"])
        func changesReachBindingsInBothFramings(vsn: String) async throws {
            let database = try TestDatabase.create()
            let (daemon, port, _) = try await Self.start(database)
            let client = try await RealtimeTestClient(port: port, apikey: Self.allKey, vsn: vsn)
            let ids = try await Self.join(client, topic: "realtime:school", bindings: #"{"event":"*","schema":"public"},{"event":"UPDATE","schema":"public","table":"course","filter":"short_code=eq.ICS4U"}"#)
            #expect(ids.count == 2 && !ids.contains(0) && Set(ids).count == 2)
            try await daemon.waitForSubscribers(1, kind: "realtime")

            try database.execute("INSERT INTO course (short_code, name) VALUES ('ICS4U', 'Computer Science')")
            try database.execute("UPDATE course SET name = 'CS' WHERE short_code = 'ICS4U'")
            try database.execute("INSERT INTO course (short_code, name) VALUES ('MCV4U', 'Calculus')")
            try database.execute("UPDATE course SET name = 'Calc' WHERE short_code = 'MCV4U'")
            try database.execute("DELETE FROM course WHERE short_code = 'MCV4U'")
            let changes = try await client.takeChanges(5, topic: "realtime:school")
            #expect(changes.map { $0["data"]?["type"]?.stringValue } == ["INSERT", "UPDATE", "INSERT", "UPDATE", "DELETE"])
            // The filtered binding matches only the ICS4U update.
            #expect(changes.map(Self.ids) == [[ids[0]], ids, [ids[0]], [ids[0]], [ids[0]]])
            let update = try #require(changes[1]["data"])
            #expect(update["schema"] == .string("public") && update["table"] == .string("course"))
            #expect(update["errors"] == .null)
            #expect(update["record"]?["name"] == .string("CS"))
            #expect(update["old_record"]?["name"] == .string("Computer Science"))
            #expect(update["columns"]?.jsonText == #"[{"name":"id","type":"int4"},{"name":"short_code","type":"varchar"},{"name":"name","type":"varchar"}]"#)
            let stamp = try #require(update["commit_timestamp"]?.stringValue)
            #expect(stamp.count == 24 && stamp.hasSuffix("Z") && stamp.dropLast(4).hasSuffix("."), "\(stamp)")
            #expect(changes[0]["data"]?["old_record"] == nil && changes[4]["data"]?["record"] == nil)
            #expect(changes[4]["data"]?["old_record"]?["short_code"] == .string("MCV4U"))

            // Heartbeats are answered; unknown events, malformed frames and binary frames that are not broadcasts get error replies.
            try await client.send(ref: "9", topic: "phoenix", event: "heartbeat")
            let beat = try await client.next { $0.topic == "phoenix" && $0.ref == .string("9") }
            #expect(beat.event == "phx_reply" && beat.payload["status"] == .string("ok"))
            try await client.send(joinRef: "1", ref: "10", topic: "realtime:school", event: "whatever", payload: #"{"event":"x"}"#)
            #expect(try await client.next { $0.ref == .string("10") }.payload["status"] == .string("error"))
            try await client.sendRaw("{not json")
            #expect(try await client.next { $0.topic == "phoenix" && $0.event == "phx_reply" }.payload["status"] == .string("error"))
            try await client.sendBinary([0, 1, 2, 3])
            #expect(try await client.next { $0.topic == "phoenix" && $0.event == "phx_reply" }.payload["status"] == .string("error"))
            try await client.send(ref: "11", topic: "phoenix", event: "heartbeat")
            try await client.next { $0.ref == .string("11") }

            // Leaving: the reply, phx_close, and the subscriber is gone.
            try await client.send(joinRef: "1", ref: "12", topic: "realtime:school", event: "phx_leave")
            #expect(try await client.next { $0.ref == .string("12") }.payload["status"] == .string("ok"))
            try await client.next { $0.event == "phx_close" && $0.topic == "realtime:school" }
            try await daemon.waitForSubscribers(0, kind: "realtime")
            await client.close()
            _ = try await daemon.stop()
        }

        @Test func manyChannelsPerSocketAndManySockets() async throws {
            let database = try TestDatabase.create()
            let (daemon, port, _) = try await Self.start(database)
            var clients: [RealtimeTestClient] = []
            for index in 0..<5 {
                let client = try await RealtimeTestClient(port: port, apikey: Self.allKey, vsn: index % 2 == 0 ? "1.0.0" : "2.0.0")
                try await Self.join(client, topic: "realtime:a", bindings: #"{"event":"INSERT","schema":"public","table":"course"}"#)
                try await Self.join(client, topic: "realtime:b", bindings: #"{"event":"INSERT","schema":"public","table":"student"}"#, ref: "2")
                clients.append(client)
            }
            try await daemon.waitForSubscribers(10, kind: "realtime")
            try database.execute("INSERT INTO course (short_code, name) VALUES ('A', 'a'); INSERT INTO student (first_name, last_name) VALUES ('S', 'T')")
            for client in clients {
                #expect(try await client.takeChanges(1, topic: "realtime:a")[0]["data"]?["table"] == .string("course"))
                #expect(try await client.takeChanges(1, topic: "realtime:b")[0]["data"]?["table"] == .string("student"))
            }
            for client in clients { await client.close() }
            try await daemon.waitForSubscribers(0, kind: "realtime")
            _ = try await daemon.stop()
        }

        @Test func aMissingOrWrongKeyGets401() async throws {
            let database = try TestDatabase.create()
            let (daemon, port, _) = try await Self.start(database)
            for query in ["vsn=1.0.0", "apikey=wrong&vsn=1.0.0", "apikey=\(Self.allKey)x"] {
                var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/realtime/v1/websocket?\(query)")
                request.headers.add(name: "connection", value: "Upgrade")
                request.headers.add(name: "upgrade", value: "websocket")
                request.headers.add(name: "sec-websocket-version", value: "13")
                request.headers.add(name: "sec-websocket-key", value: "dGhlIHNhbXBsZSBub25jZQ==")
                let response = try await TestHTTP.client.execute(request, timeout: .seconds(10))
                #expect(response.status.code == 401, "\(query)")
                #expect(String(buffer: try await response.body.collect(upTo: 4096)).contains("key"))
            }
            await #expect(throws: RealtimeConnectFailed.self) { _ = try await RealtimeTestClient(port: port, apikey: "nope") }
            // A known key without the upgrade: the endpoint says it speaks WebSocket.
            let plain = try await TestHTTP.client.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/realtime/v1/websocket?apikey=\(Self.allKey)"), timeout: .seconds(10))
            #expect(plain.status.code == 426)
            // An unknown vsn is a bad request.
            let vsn = try await TestHTTP.client.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/realtime/v1/websocket?apikey=\(Self.allKey)&vsn=9"), timeout: .seconds(10))
            #expect(vsn.status.code == 400)
            _ = try await daemon.stop()
        }

        @Test func aGrantHidesTablesAndBadBindingsAreReported() async throws {
            let database = try TestDatabase.create()
            let (daemon, port, _) = try await Self.start(database)
            let client = try await RealtimeTestClient(port: port, apikey: Self.coursesKey)
            let unrestricted = try await RealtimeTestClient(port: port, apikey: Self.allKey)
            // A table outside the grant (whether it exists or not, so a key cannot probe for
            // tables), a bad filter, an unknown table: the ok reply, then a system error.
            for (client, topic, binding, reason) in [
                (client, "realtime:hidden", #"{"event":"*","schema":"public","table":"student"}"#, "Unauthorized"),
                (client, "realtime:hiddenmissing", #"{"event":"*","schema":"public","table":"nope"}"#, "Unauthorized"),
                (client, "realtime:badfilter", #"{"event":"*","schema":"public","table":"course","filter":"id=between.1"}"#, "Error parsing `filter` params"),
                (unrestricted, "realtime:nosuch", #"{"event":"*","schema":"public","table":"nope"}"#, "Unable to subscribe"),
                (client, "realtime:badvalue", #"{"event":"*","schema":"public","table":"course","filter":"id=eq.abc"}"#, "Error parsing `filter` params"),
                (unrestricted, "realtime:nocolumn", #"{"event":"*","schema":"public","table":"course","filter":"nope=eq.1"}"#, "Error parsing `filter` params"),
            ] {
                try await client.send(joinRef: "1", ref: "1", topic: topic, event: "phx_join", payload: Self.joinPayload(binding))
                #expect(try await client.next { $0.topic == topic && $0.event == "phx_reply" }.payload["status"] == .string("ok"))
                let system = try await client.next { $0.topic == topic && $0.event == "system" }
                #expect(system.payload["status"] == .string("error"))
                #expect(system.payload["message"]?.stringValue?.contains(reason) == true, "\(system.payload.jsonText)")
            }
            // The whole schema: only the granted table's events arrive.
            try await Self.join(client, topic: "realtime:all", bindings: #"{"event":"*","schema":"public"}"#)
            try database.execute("INSERT INTO student (first_name, last_name) VALUES ('Hidden', 'Row')")
            try database.execute("INSERT INTO course (short_code, name) VALUES ('SEEN', 'Seen')")
            let changes = try await client.takeChanges(1, topic: "realtime:all")
            #expect(changes[0]["data"]?["table"] == .string("course"))
            try await Task.sleep(for: .milliseconds(300))
            #expect(!client.unread.contains { $0.contains("Hidden") })
            try await daemon.waitForSubscribers(1, kind: "realtime")
            await client.close()
            await unrestricted.close()
            _ = try await daemon.stop()
        }

        @Test func tokensAreCheckedOnJoinAndWhenPushed() async throws {
            let database = try TestDatabase.create()
            let (daemon, port, _) = try await Self.start(database)
            let anon = makeToken(#"{"role":"anon","exp":\#(Int(Date().timeIntervalSince1970) + 3600)}"#, secret: Self.jwtSecret)
            let client = try await RealtimeTestClient(port: port, apikey: anon)
            try await Self.join(client, topic: "realtime:c", bindings: #"{"event":"*","schema":"public","table":"course"}"#, token: anon)
            // A join whose own token is bad is refused with an error reply.
            try await client.send(joinRef: "5", ref: "5", topic: "realtime:bad", event: "phx_join", payload: Self.joinPayload(#"{"event":"*","schema":"public"}"#, token: "garbage"))
            #expect(try await client.next { $0.ref == .string("5") }.payload["status"] == .string("error"))
            // A good pushed token is accepted silently; deliveries go on.
            try await client.send(joinRef: "1", ref: "6", topic: "realtime:c", event: "access_token", payload: #"{"access_token":"\#(anon)"}"#)
            try database.execute("INSERT INTO course (short_code, name) VALUES ('T1', 't')")
            #expect(try await client.takeChanges(1, topic: "realtime:c")[0]["data"]?["record"]?["short_code"] == .string("T1"))
            // An expired one ends the channel: a system error, then phx_close.
            let expired = makeToken(#"{"role":"anon","exp":1000}"#, secret: Self.jwtSecret)
            try await client.send(joinRef: "1", ref: "7", topic: "realtime:c", event: "access_token", payload: #"{"access_token":"\#(expired)"}"#)
            let system = try await client.next { $0.topic == "realtime:c" && $0.event == "system" }
            #expect(system.payload["status"] == .string("error") && system.payload["message"] == .string("Token has expired"))
            try await client.next { $0.topic == "realtime:c" && $0.event == "phx_close" }
            // A private channel joined with a key that grants every topic ends when a pushed token's role does not grant it.
            let privateJoin = Self.joinPayload(#"{"event":"*","schema":"public","table":"course"}"#, token: Self.allKey)
                .replacingOccurrences(of: #""private":false"#, with: #""private":true"#)
            try await client.send(joinRef: "8", ref: "8", topic: "realtime:vip", event: "phx_join", payload: privateJoin)
            #expect(try await client.next { $0.ref == .string("8") }.payload["status"] == .string("ok"))
            try await client.send(joinRef: "8", ref: "9", topic: "realtime:vip", event: "access_token", payload: #"{"access_token":"\#(anon)"}"#)
            let revoked = try await client.next { $0.topic == "realtime:vip" && $0.event == "system" && $0.payload["status"] == .string("error") }
            #expect(revoked.payload["message"]?.stringValue?.contains("private topic 'vip' is not granted") == true, "\(revoked.payload.jsonText)")
            try await client.next { $0.topic == "realtime:vip" && $0.event == "phx_close" }
            try await daemon.waitForSubscribers(0, kind: "realtime")
            await client.close()
            _ = try await daemon.stop()
        }

        @Test func aDroppedSocketRejoiningGetsWhatItMissed() async throws {
            let database = try TestDatabase.create()
            let (daemon, port, _) = try await Self.start(database)
            let binding = #"{"event":"INSERT","schema":"public","table":"course"}"#
            let first = try await RealtimeTestClient(port: port, apikey: Self.allKey)
            try await Self.join(first, topic: "realtime:resume", bindings: binding)
            try database.execute("INSERT INTO course (short_code, name) VALUES ('R0', 'before')")
            _ = try await first.takeChanges(1, topic: "realtime:resume")
            await first.close()
            try await daemon.waitForSubscribers(0, kind: "realtime")
            for index in 1...3 { try database.execute("INSERT INTO course (short_code, name) VALUES ('R\(index)', 'missed')") }
            // Another caller on the same topic gets nothing from before its join.
            let other = try await RealtimeTestClient(port: port, apikey: Self.coursesKey)
            try await Self.join(other, topic: "realtime:resume", bindings: binding)
            let second = try await RealtimeTestClient(port: port, apikey: Self.allKey, vsn: "2.0.0")
            try await Self.join(second, topic: "realtime:resume", bindings: binding)
            try database.execute("INSERT INTO course (short_code, name) VALUES ('R4', 'live')")
            let codes = try await second.takeChanges(4, topic: "realtime:resume").map { $0["data"]?["record"]?["short_code"]?.stringValue }
            #expect(codes == ["R1", "R2", "R3", "R4"])
            #expect(try await other.takeChanges(1, topic: "realtime:resume")[0]["data"]?["record"]?["short_code"] == .string("R4"))
            await second.close()
            await other.close()
            _ = try await daemon.stop()
        }

        @Test func rowsOfAnySizeArriveWhole() async throws {
            let database = try TestDatabase.create()
            let (daemon, port, _) = try await Self.start(database)
            try database.execute("CREATE TABLE note (id serial PRIMARY KEY, body text)")
            let client = try await RealtimeTestClient(port: port, apikey: Self.allKey)
            try await Self.join(client, topic: "realtime:notes", bindings: #"{"event":"*","schema":"public","table":"note"}"#)
            let body = String(repeating: "0123456789", count: 20_000)
            try database.execute("INSERT INTO note (body) VALUES ($1)", parameters: [body])
            try database.execute("DELETE FROM note")
            let changes = try await client.takeChanges(2, topic: "realtime:notes")
            #expect(changes[0]["data"]?["record"]?["body"] == .string(body))
            #expect(changes[1]["data"]?["old_record"]?["body"] == .string(body))
            #expect(changes.allSatisfy { $0["data"]?["errors"] == .null })
            await client.close()
            _ = try await daemon.stop()
        }
    }
}
