import Foundation
import Herald
import HeraldClient
import Synchronization
import Testing

extension IntegrationTests {
    /// `GET /events` over the real socket: framing, filters, refusals, limits.
    @Suite
    struct SocketStreamTests {
        @Test func sseAndNDJSONFramingParseBackToTheSameEvents() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database)
            let sse = try await RawStream(socketPath: daemon.socketPath, path: "/events?table=course")
            let ndjson = try await RawStream(socketPath: daemon.socketPath, path: "/events?table=course&format=ndjson")
            let negotiated = try await RawStream(
                socketPath: daemon.socketPath, path: "/events?table=course", headers: [("Accept", "application/x-ndjson")]
            )
            #expect(sse.contentType.hasPrefix("text/event-stream"))
            #expect(ndjson.contentType == "application/x-ndjson")
            #expect(negotiated.contentType == "application/x-ndjson")

            try database.execute("INSERT INTO course (short_code, name) VALUES ('ADA3M', 'Drama \"and\" Theatre')")
            try database.execute("UPDATE course SET name = 'Zoë ☕' WHERE short_code = 'ADA3M'")
            try database.execute("DELETE FROM course WHERE short_code = 'ADA3M'")

            let sseText = try await sse.text { $0.components(separatedBy: "\n\n").count >= 5 }
            var parser = ServerSentEventParser()
            let messages = try parser.feed(Array(sseText.utf8))
            #expect(sseText.hasPrefix("retry: 1000\n\n"))
            #expect(messages.map(\.type) == ["INSERT", "UPDATE", "DELETE"])
            let sseEvents = try messages.map { try Event(payload: $0.data) }
            #expect(messages.map(\.id) == sseEvents.map(\.id))
            #expect(sseEvents.map(\.count) == [1, 2, 3])
            #expect(sseEvents[1].new?["name"] == .string("Zoë ☕"))
            #expect(sseEvents[0].new?["name"] == .string("Drama \"and\" Theatre"))

            for stream in [ndjson, negotiated] {
                let text = try await stream.text { $0.split(separator: "\n").count >= 3 }
                let lines = text.split(separator: "\n")
                #expect(try lines.map { try Event(payload: String($0)) } == sseEvents)
            }
        }

        @Test func everyFilterKindSelectsExactlyItsEvents() async throws {
            let database = try TestDatabase.create()
            try database.execute("CREATE SCHEMA school; CREATE TABLE school.room (number int PRIMARY KEY, floor int, name text, open boolean)")
            try database.execute("SELECT pgherald.watch('{school}')")
            let daemon = try await SocketDaemon(database: database)
            let filters: [String: String] = [
                "bare table": "table=course",
                "qualified tables": "table=school.room,public.student",
                "repeated tables": "table=course&table=student",
                "op": "op=delete,TRUNCATE",
                "eq": "table=school.room&where=name.eq.Lab%20A",
                "neq": "table=school.room&where=floor.neq.1",
                "lt": "where=floor.lt.2",
                "lte": "where=floor.lte.2",
                "gt": "where=number.gt.101",
                "gte": "table=school.room&where=number.gte.102",
                "in": "where=name.in.(Gym,%22Lab%20A%22)",
                "is": "where=open.is.false",
                "combined": "table=school.room&op=UPDATE&where=floor.gte.2&where=open.is.true",
            ]
            var streams: [String: RawStream] = [:]
            for (name, query) in filters {
                streams[name] = try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson&\(query)")
            }
            try database.execute("""
                INSERT INTO school.room VALUES (101, 1, 'Lab A', true), (102, 2, 'Gym', false), (103, 3, 'Library', true);
                INSERT INTO course (short_code, name) VALUES ('ADA3M', 'Drama');
                INSERT INTO student (first_name, last_name) VALUES ('Ada', 'Lovelace');
                UPDATE school.room SET floor = 4 WHERE number = 103;
                DELETE FROM school.room WHERE number = 101;
                TRUNCATE enrols_in;
                """)
            // 9 events in all; id order = commit order.
            let expected: [String: [String]] = [
                "bare table": ["INSERT course"],
                "qualified tables": ["INSERT room", "INSERT room", "INSERT room", "INSERT student", "UPDATE room", "DELETE room"],
                "repeated tables": ["INSERT course", "INSERT student"],
                "op": ["DELETE room", "TRUNCATE enrols_in"],
                "eq": ["INSERT room", "DELETE room"],
                "neq": ["INSERT room", "INSERT room", "UPDATE room"],
                "lt": ["INSERT room", "DELETE room"],
                "lte": ["INSERT room", "INSERT room", "DELETE room"],
                "gt": ["INSERT room", "INSERT room", "UPDATE room"],
                "gte": ["INSERT room", "INSERT room", "UPDATE room"],
                "in": ["INSERT room", "INSERT room", "DELETE room"],
                "is": ["INSERT room"],
                "combined": ["UPDATE room"],
            ]
            // A last event, published after all the others: once a stream that
            // sees it has it, every stream has been offered everything before it.
            try database.execute("INSERT INTO school.room VALUES (999, 1, 'Lab A', false)")
            _ = try await streams["qualified tables"]!.text { $0.contains(#""number":999"#) }
            try await Task.sleep(for: .milliseconds(300))
            for (name, stream) in streams {
                let count = expected[name]!.count
                let text = try await stream.text { $0.split(separator: "\n").count >= count }
                let events = try text.split(separator: "\n").map { try Event(payload: String($0)) }
                    .filter { $0.new?["number"] != .number(JSONNumber(999)) }
                #expect(events.map { "\($0.operation) \($0.table.name)" } == expected[name], "filter \(name)")
            }
        }

        @Test(arguments: [
            ("table=nope", "unknown_table", "table"),
            ("table=school.course", "unknown_table", "table"),
            ("where=nocolumn.eq.1", "unknown_column", "where"),
            ("table=course&where=first_name.eq.Ada", "unknown_column", "where"),
            ("where=name.match.x", "malformed_filter", "where"),
            ("where=name", "malformed_filter", "where"),
            ("op=UPSERT", "malformed_filter", "op"),
            ("tabel=course", "unknown_parameter", "tabel"),
            ("format=xml", "malformed_filter", "format"),
            ("where=name.eq.%ZZ%00%ff", "unknown_column", "where"),
            ("table=" + String(repeating: "x", count: 5000), "malformed_filter", "table"),
        ])
        func badFiltersGet400AndSubscribeNothing(query: String, error: String, parameter: String) async throws {
            let database = try TestDatabase.create(enrolment: true)
            try database.execute("ALTER TABLE course RENAME COLUMN name TO title")
            let daemon = try await SocketDaemon(database: database)
            let (status, body) = try await daemon.get("/events?\(query)")
            #expect(status == 400)
            let json = try #require(try JSONParser.parse(body).objectValue)
            #expect(json["error"] == .string(error))
            #expect(json["parameter"] == .string(parameter))
            #expect(json["message"]?.stringValue?.isEmpty == false)
            #expect(try await daemon.statistics().subscribers.isEmpty)
            _ = try await daemon.stop()
        }

        @Test func subscriberLimitAnswers503() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database, arguments: ["--max-subscribers", "2"])
            let first = try await RawStream(socketPath: daemon.socketPath, path: "/events")
            let second = try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson")
            let (status, body) = try await daemon.get("/events")
            #expect(status == 503)
            #expect(body.contains("too_many_subscribers"))
            withExtendedLifetime((first, second)) {}
        }

        /// Shutdown ends the open streams, and clients come straight back.
        /// Until the socket closes they are told to try later (503), which
        /// `HeraldClient` reports as unreachable. Before, one that got in
        /// between the streams' end and the socket's close was given a new
        /// stream, which nothing ended: the daemon never exited.
        @Test func clientsComingBackDuringShutdownAreRefusedAndTheDaemonExits() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database)
            // Each client counts the streams it was given again.
            var clients: [Task<Int, Never>] = []
            for _ in 0..<100 {
                clients.append(Task {
                    var reconnections = 0
                    do {
                        for try await message in daemon.client.messages() {
                            if case .reconnected = message { reconnections += 1 }
                        }
                    } catch {}
                    return reconnections
                })
            }
            try await daemon.waitForSubscribers(100, kind: "sse")
            let stopped = try await daemon.stop(within: 6)
            #expect(stopped.status == 0, "\(stopped.stderr)")
            var reconnections = 0
            for client in clients {
                client.cancel()
                reconnections += await client.value
            }
            #expect(reconnections == 0, "a client was given a stream while the daemon shut down")
        }

        @Test func eventsArrivingSoonAfterAWriteWaitForTheWriteSpacing() async throws {
            let database = try TestDatabase.create()
            // One stream at 2 writes a second: 500 ms between its writes.
            let daemon = try await SocketDaemon(database: database, arguments: ["--write-rate", "2"])
            let stream = try await RawStream(socketPath: daemon.socketPath, path: "/events?table=course&format=ndjson")
            let start = ContinuousClock.now
            try database.execute("INSERT INTO course (short_code, name) VALUES ('C1', 'First')")
            try await stream.waitForLines(1)
            try database.execute("INSERT INTO course (short_code, name) VALUES ('C2', 'Second')")
            try database.execute("INSERT INTO course (short_code, name) VALUES ('C3', 'Third')")
            try await stream.waitForLines(3)
            // The first write came after the first commit, and the next no sooner than 500 ms after it.
            #expect(ContinuousClock.now - start >= .milliseconds(500))
            #expect(try stream.lines.map { try Event(payload: String($0)).count } == [1, 2, 3])
        }

        @Test func idleStreamsGetHeartbeats() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database, arguments: ["--heartbeat-interval", "0.2"])
            let sse = try await RawStream(socketPath: daemon.socketPath, path: "/events")
            let text = try await sse.text(within: 5) { $0.components(separatedBy: ": heartbeat\n\n").count >= 3 }
            #expect(!text.contains("event:"))
        }

        @Test func aStreamAskedForOnAUsedConnectionFollowsTheResponseBeforeIt() async throws {
            let database = try TestDatabase.create()
            let config = FileManager.default.temporaryDirectory.appending(path: "pgherald-reuse-\(UUID().uuidString.prefix(8)).yaml").path
            try "socket:\n  idle_timeout: 1s\n".write(toFile: config, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: config) }
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            // Pipelined: the stream's request arrives while /stats is still being answered.
            let client = try StalledClient(
                socketPath: daemon.socketPath, path: "/stats HTTP/1.1\r\nHost: localhost\r\n\r\nGET /events?format=ndjson&table=course"
            )
            try await Task.sleep(for: .milliseconds(300))
            try database.execute("INSERT INTO course (short_code, name) VALUES ('REUSE', 'r')")
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(client.descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !String(decoding: received, as: UTF8.self).contains("REUSE") {
                let count = recv(client.descriptor, &buffer, buffer.count, 0)
                guard count > 0 else { break }
                received += buffer[0..<count]
            }
            let text = String(decoding: received, as: UTF8.self)
            let heads = text.components(separatedBy: "HTTP/1.1 200 OK")
            try #require(heads.count == 3, "two responses expected: \(text)")
            #expect(heads[1].contains("\"changeCount\""), "the /stats answer comes first, whole")
            #expect(heads[2].lowercased().contains("content-type: application/x-ndjson"))
            #expect(heads[2].contains("\"REUSE\""))
            // The idle timeout of the requests before it does not end the stream.
            try await Task.sleep(for: .seconds(2))
            try database.execute("INSERT INTO course (short_code, name) VALUES ('LATER', 'l')")
            while !String(decoding: received, as: UTF8.self).contains("LATER") {
                let count = recv(client.descriptor, &buffer, buffer.count, 0)
                guard count > 0 else { break }
                received += buffer[0..<count]
            }
            #expect(String(decoding: received, as: UTF8.self).contains("\"LATER\""), "the stream ended at the idle timeout")
        }

        @Test func statsAndHealthReportTheDaemon() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database)
            let stream = try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson")
            try database.execute("INSERT INTO course (short_code, name) VALUES ('A', 'a'), ('B', 'b')")
            _ = try await stream.text { $0.split(separator: "\n").count == 2 }
            let statistics = try await daemon.statistics()
            #expect(statistics.changeCount == 2)
            #expect(statistics.tables == ["public.course": 2])
            #expect(statistics.subscribers == ["ndjson": 1])
            #expect(statistics.listener == .init(state: "listening"))
            #expect(statistics.uptimeSeconds > 0)

            // Block reconnects, cut the listener: health turns 503 with a reason, then recovers.
            try PostgresAdmin.execute("ALTER DATABASE \(database.name) ALLOW_CONNECTIONS false")
            try PostgresAdmin.execute("""
                SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE datname = '\(database.name)' AND application_name = 'pgherald'
                """)
            var health = try await daemon.get("/healthz")
            let deadline = ContinuousClock.now + .seconds(10)
            while health.status == 200, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
                health = try await daemon.get("/healthz")
            }
            #expect(health.status == 503)
            #expect(health.body.contains(#""state":"reconnecting""#))
            #expect(health.body.contains("reason"))
            try PostgresAdmin.execute("ALTER DATABASE \(database.name) ALLOW_CONNECTIONS true")
            try await daemon.waitUntilHealthy()
        }
    }
}
