import AsyncHTTPClient
import Foundation
import Herald
import NIOCore
import Testing

extension IntegrationTests {
    /// Supabase's own Python client, `realtime` from PyPI (pinned in
    /// tests/realtime/requirements.txt, installed into a venv by scripts/test),
    /// against the daemon over TCP, plus the Unix socket with a raw WebSocket.
    @Suite
    struct SupabaseClientTests {
        /// Broadcast between realtime-py clients (`self`, the REST endpoint, and
        /// private topics granted by `topics:`; a key without them is refused),
        /// a database broadcast (on commit, not on rollback), then presence:
        /// state on joining, joins, untrack, and a client that vanishes.
        @Test func thePythonClientsBroadcastAndSeeEachOthersPresence() async throws {
            let python = try #require(ProcessInfo.processInfo.environment["PGHERALD_TEST_REALTIME_PYTHON"], "scripts/test sets it")
            let database = try TestDatabase.create()
            let port = freeLoopbackPort()
            let config = FileManager.default.temporaryDirectory.appending(path: "pgherald-broadcast-\(UUID().uuidString.prefix(8)).yaml").path
            let roomsKey = "rooms-0123456789abcdef"
            try """
                realtime:
                  listen: 127.0.0.1:\(port)
                  keys:
                    all:
                      key: \(RealtimeTests.allKey)
                    courses:
                      key: \(RealtimeTests.coursesKey)
                      tables: [public.course]
                    rooms:
                      key: \(roomsKey)
                      tables: [public.course]
                      topics: [room-*]
                """.write(toFile: config, atomically: true, encoding: .utf8)
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            let script = TestDatabase.repositoryRoot.appending(path: "tests/realtime/broadcast_test.py").path
            let client = try DaemonProcess(
                [script, "--port", String(port), "--all-key", RealtimeTests.allKey, "--courses-key", RealtimeTests.coursesKey, "--rooms-key", roomsKey,
                 "--dsn", database.connInfo],
                executable: URL(fileURLWithPath: python)
            )
            let result = try await client.finish(within: 90)
            #expect(result.status == 0, "\(result.stderr.suffix(3000))")
            #expect(result.stdout.hasSuffix("OK\n"), "\(result.stdout)")

            // The REST endpoint says why it refuses: no key, a private topic outside the grant, a body too large.
            func post(_ path: String, key: String?, body: String) async throws -> (UInt, String) {
                var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/realtime/v1/api/broadcast\(path)")
                request.method = .POST
                if let key { request.headers.add(name: "apikey", value: key) }
                request.body = .bytes(ByteBuffer(string: body))
                let response = try await TestHTTP.client.execute(request, timeout: .seconds(10))
                return (response.status.code, String(buffer: try await response.body.collect(upTo: 1 << 20)))
            }
            #expect(try await post("/lobby/events/e", key: nil, body: "{}").0 == 401)
            let forbidden = try await post("/room-1/events/e?private=true", key: RealtimeTests.coursesKey, body: "{}")
            #expect(forbidden.0 == 403 && forbidden.1.contains("not granted the private topic"), "\(forbidden)")
            let tooLarge = try await post("/lobby/events/e", key: RealtimeTests.allKey, body: #"{"blob":"\#(String(repeating: "x", count: 80_000))"}"#)
            #expect(tooLarge.0 == 413 && tooLarge.1.contains("at most 65536 bytes"), "\(tooLarge)")
            let malformed = try await post("", key: RealtimeTests.allKey, body: #"{"messages":[{"event":"e"}]}"#)
            #expect(malformed.0 == 400 && malformed.1.contains("topic and an event"), "\(malformed)")
            #expect(try await post("", key: RealtimeTests.allKey, body: #"{"messages":[{"topic":"lobby","event":"e","payload":{}}]}"#).0 == 202)

            // ack: true gets an ok reply for each broadcast; a broadcast over the size limit gets an error.
            let sender = try await RealtimeTestClient(port: port, apikey: RealtimeTests.allKey)
            let joinAcknowledged = #"{"config":{"broadcast":{"ack":true,"self":false},"presence":{"key":"","enabled":false},"private":false,"postgres_changes":[]}}"#
            try await sender.send(joinRef: "1", ref: "1", topic: "realtime:acks", event: "phx_join", payload: joinAcknowledged)
            _ = try await sender.next(within: 10, "join reply") { $0.event == "phx_reply" && $0.ref == .string("1") }
            try await sender.send(joinRef: "1", ref: "2", topic: "realtime:acks", event: "broadcast", payload: #"{"type":"broadcast","event":"e","payload":{"n":1}}"#)
            let ack = try await sender.next(within: 10, "acknowledgement") { $0.event == "phx_reply" && $0.ref == .string("2") }
            #expect(ack.payload["status"] == .string("ok"))
            let large = String(repeating: "x", count: 70_000)
            try await sender.send(joinRef: "1", ref: "3", topic: "realtime:acks", event: "broadcast", payload: #"{"type":"broadcast","event":"e","payload":{"blob":"\#(large)"}}"#)
            let refused = try await sender.next(within: 10, "refusal") { $0.event == "phx_reply" && $0.ref == .string("3") }
            #expect(refused.payload["status"] == .string("error"))
            #expect(refused.payload["response"]?["reason"]?.stringValue?.contains("realtime.broadcast.max_bytes") == true, "\(refused.payload.jsonText.prefix(300))")
            _ = try await daemon.stop()
        }

        @Test func thePythonClientSubscribesUnchangedAndRidesOutARestart() async throws {
            let python = try #require(
                ProcessInfo.processInfo.environment["PGHERALD_TEST_REALTIME_PYTHON"],
                "PGHERALD_TEST_REALTIME_PYTHON is not set; scripts/test installs the client and sets it"
            )
            let database = try TestDatabase.create()
            var (daemon, port, config) = try await RealtimeTests.start(database)
            let script = TestDatabase.repositoryRoot.appending(path: "tests/realtime/supabase_client_test.py").path
            let client = try DaemonProcess(
                [script, "--port", String(port), "--key", RealtimeTests.allKey, "--socket", daemon.socketPath, "--dsn", database.connInfo],
                executable: URL(fileURLWithPath: python), withInput: true
            )
            do {
                _ = try await client.readLine(within: 60) { $0 == "RESTART" }
            } catch {
                let result = try await client.finish(within: 5)
                Issue.record("the client stopped before the restart (\(result.status)): \(result.stderr)")
                return
            }
            _ = try await daemon.stop()
            daemon = try await SocketDaemon(database: database, socketPath: daemon.socketPath, arguments: ["--config", config])
            client.write(line: "restarted")
            let result = try await client.finish(within: 60)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.hasSuffix("OK\n"), "\(result.stdout)")
            _ = try await daemon.stop()
        }
    }
}
