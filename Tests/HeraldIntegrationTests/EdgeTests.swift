import Foundation
import Herald
import Testing

extension IntegrationTests {
    /// Edge daemons (`source: nats`) fed by the R3 stream a database daemon's
    /// `nats` output fills, on a real 3-node NATS cluster on loopback.
    @Suite(.enabled(if: NATSServer.executable != nil, "scripts/test provides nats-server"))
    struct EdgeTests {
        static let key = "edge-key-0123456789abc"

        struct Members {
            var database: SocketDaemon
            var edges: [SocketDaemon]
            /// Each edge's realtime listener.
            var ports: [Int]
            /// The database daemon's.
            var databasePort: Int
        }

        static func write(_ text: String) throws -> String {
            let path = FileManager.default.temporaryDirectory.appending(path: "pgherald-edge-\(UUID().uuidString.prefix(8)).yaml").path
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }

        /// One database daemon publishing to the R3 stream, and `count` edges reading it, each first trying another NATS node.
        /// - Parameter edgeExtra: more configuration for every edge.
        static func start(_ database: TestDatabase, _ nats: NATSCluster, edges count: Int = 2, edgeExtra: String = "") async throws -> Members {
            let all = nats.urls.joined(separator: ", ")
            let databasePort = freeLoopbackPort()
            let source = try await SocketDaemon(database: database, arguments: ["--name", "db", "--config", try write("""
                realtime:
                  listen: 127.0.0.1:\(databasePort)
                  keys:
                    all:
                      key: \(key)
                nats:
                  servers: [\(all)]
                  stream: PGHERALD
                  create_stream: true
                  replicas: 3
                cluster:
                  name: test
                  nats: [\(all)]
                  member: db
                """)])
            try await waitFor(seconds: 30) { try await source.statistics().outputs?["nats"]?.health == "ok" }
            var edges: [SocketDaemon] = []
            var ports: [Int] = []
            for index in 0..<count {
                let port = freeLoopbackPort()
                let servers = (0..<3).map { nats.urls[(index + 1 + $0) % 3] }.joined(separator: ", ")
                edges.append(try await SocketDaemon(database: database, arguments: ["--name", "edge-\(index)", "--config", try write("""
                    source: nats
                    cluster:
                      name: test
                      nats: [\(servers)]
                      member: edge-\(index)
                      stream: PGHERALD
                    realtime:
                      listen: 127.0.0.1:\(port)
                      keys:
                        all:
                          key: \(key)
                    \(edgeExtra)
                    """)]))
                ports.append(port)
            }
            for edge in edges {
                try await waitFor(seconds: 30) { try await edge.statistics().listener.state == "listening" } failure: { "an edge did not start reading" }
                try await waitFor(seconds: 20) { try await edge.statistics().cluster?.members.count == count + 1 } failure: { "the cluster did not form" }
            }
            return Members(database: source, edges: edges, ports: ports, databasePort: databasePort)
        }

        /// The events of a `text/event-stream` body: (event id, short_code of the row).
        static func received(_ text: String) -> [(id: String, code: String)] {
            text.split(separator: "\n").compactMap { line in
                guard line.hasPrefix("data: "), let event = try? Event(payload: String(line.dropFirst(6))),
                      let code = event.row?["short_code"]?.stringValue else { return nil }
                return (event.id, code)
            }
        }

        static func codes(_ prefix: String, _ range: Range<Int>) -> [String] { range.map { "\(prefix)\($0)" } }

        /// A writer commits while an SSE client reads edge A; A is killed with
        /// SIGKILL, and the client resumes on edge B with its last id: every
        /// row arrives exactly once, in commit order. PostgreSQL has one
        /// reader of the journal, and an edge serves `postgres_changes`.
        @Test func aClientMovesToAnotherEdgeWithNothingLostOrRepeated() async throws {
            let database = try TestDatabase.create()
            let nats = try await NATSCluster()
            let members = try await Self.start(database, nats)
            let realtime = try await RealtimeTestClient(port: members.ports[1], apikey: Self.key)
            try await RealtimeTests.join(realtime, topic: "realtime:school", bindings: #"{"event":"INSERT","schema":"public","table":"course"}"#)

            let first = try await RawStream(socketPath: members.edges[0].socketPath, path: "/events?table=public.course")
            let writer = Task.detached {
                for row in 0..<300 {
                    try database.execute("INSERT INTO course (short_code, name) VALUES ($1, 'course')", parameters: ["E\(row)"])
                    try await Task.sleep(for: .milliseconds(5))
                }
            }
            _ = try await first.text(within: 30) { Self.received($0).count >= 100 }
            members.edges[0].process.signal(SIGKILL)
            _ = try await members.edges[0].process.finish()
            let before = Self.received(first.received)
            let last = try #require(before.last?.id)

            let second = try await RawStream(socketPath: members.edges[1].socketPath, path: "/events?table=public.course", headers: [("Last-Event-ID", last)])
            try await writer.value
            _ = try await second.text(within: 60) { before.count + Self.received($0).count >= 300 }
            try await Task.sleep(for: .milliseconds(300))
            let after = Self.received(second.received)
            #expect((before + after).map(\.code) == Self.codes("E", 0..<300), "every row once, in commit order: \(before.count) on A, \(after.count) on B")
            #expect(!second.received.contains("event: reset"), "\(second.received.prefix(300))")

            // The same event has the same id and count on the database daemon and on an edge.
            let counted = try await members.edges[1].statistics().changeCount
            #expect(counted >= 300, "an edge counts by the stream's sequence: \(counted)")

            // Scale: only the database daemon reads the journal.
            let readers = try database.execute("SELECT name FROM pgherald.daemon ORDER BY name").rows.map { $0.first ?? nil }
            #expect(readers == ["db"], "\(readers)")
            let stats = try await members.edges[1].statistics()
            #expect(stats.listener.source == "nats stream PGHERALD" && stats.listener.streamLag == 0, "\(stats.listener)")
            #expect(stats.cluster?.members.first { $0.isSelf }?.role == "edge")
            let health = try await members.edges[1].get("/healthz")
            #expect(health.status == 200 && health.body.contains("\"streamSequence\""), "\(health)")
            let metrics = try await members.edges[1].get("/metrics").body
            #expect(metrics.contains("pgherald_edge_stream_lag 0"))

            // postgres_changes from an edge.
            let change = try await realtime.next(within: 20, "an INSERT through the edge") { $0.event == "postgres_changes" }
            #expect(change.payload["data"]?["record"]?["short_code"] == .string("E0"), "\(change.payload.jsonText.prefix(300))")

            // Whole transactions: the stream marks each transaction's last event.
            let grouped = try await RawStream(socketPath: members.edges[1].socketPath, path: "/events?table=public.course&group=transaction")
            try database.execute("BEGIN; INSERT INTO course (short_code, name) VALUES ('T1', 'a'), ('T2', 'b'); COMMIT")
            let group = try await grouped.text(within: 20) { $0.contains("T1") && $0.contains("T2") }
            #expect(group.contains("event: transaction"), "\(group.prefix(500))")
            _ = try await members.edges[1].stop()
            _ = try await members.database.stop()
        }

        /// A Supabase client sends no position when it rejoins: an edge that
        /// stops gracefully tells the others where each channel stopped, so
        /// the client rejoins another edge and misses and repeats nothing.
        /// Many channels stop at once: each position goes out before the edge's cluster connection closes.
        @Test func aSupabaseClientRejoinsAnotherEdgeWhereItStopped() async throws {
            let database = try TestDatabase.create()
            let nats = try await NATSCluster()
            let members = try await Self.start(database, nats)
            let bindings = #"{"event":"INSERT","schema":"public","table":"course"}"#
            let topics = ["realtime:school"] + (1...40).map { "realtime:school-\($0)" }
            var client = try await RealtimeTestClient(port: members.ports[0], apikey: Self.key)
            for (ref, topic) in topics.enumerated() {
                try await RealtimeTests.join(client, topic: topic, bindings: bindings, ref: "\(ref + 1)")
            }
            func codes(_ client: RealtimeTestClient, _ topic: String) -> [String] {
                client.unreadMessages.compactMap { message in
                    message.topic == topic && message.event == "postgres_changes" ? message.payload["data"]?["record"]?["short_code"]?.stringValue : nil
                }
            }
            func insert(_ rows: Range<Int>) throws {
                for row in rows { try database.execute("INSERT INTO course (short_code, name) VALUES ($1, 'course')", parameters: ["S\(row)"]) }
            }
            try insert(0..<50)
            try await waitFor(seconds: 30) { topics.allSatisfy { codes(client, $0).count >= 50 } }
            let stopped = try await members.edges[0].stop()
            #expect(stopped.status == 0, "\(stopped.stderr.suffix(500))")
            let before = Dictionary(uniqueKeysWithValues: topics.map { ($0, codes(client, $0)) })
            // Rows commit while the client is away; the rejoin must replay them.
            try insert(50..<80)
            try await waitFor(seconds: 30) { try await members.edges[1].statistics().changeCount >= 80 }
            client = try await RealtimeTestClient(port: members.ports[1], apikey: Self.key)
            for (ref, topic) in topics.enumerated() {
                try await RealtimeTests.join(client, topic: topic, bindings: bindings, ref: "\(ref + 1)")
            }
            try insert(80..<100)
            try await waitFor(seconds: 30) { topics.allSatisfy { before[$0, default: []].count + codes(client, $0).count >= 100 } } failure: {
                topics.map { "\($0): \(before[$0, default: []].count) + \(codes(client, $0).count)" }.joined(separator: ", ") + " of 100"
            }
            try await Task.sleep(for: .milliseconds(300))
            for topic in topics {
                #expect(before[topic, default: []] + codes(client, topic) == Self.codes("S", 0..<100), "\(topic): every row once, in order, across the two edges")
            }
            _ = try await members.edges[1].stop()
            _ = try await members.database.stop()
        }

        /// Live queries on an edge run on the edge's own database (a read
        /// replica would do), refreshed by the events it takes from the stream.
        @Test func anEdgeServesALiveQueryFromItsOwnDatabase() async throws {
            let database = try TestDatabase.create()
            let nats = try await NATSCluster()
            let members = try await Self.start(database, nats, edges: 1, edgeExtra: """
                queries:
                  enrolments_by_course:
                    sql: \(LiveQueryTests.enrolmentsByCourse.sql) order by c.id
                    key: [course_id]
                """)
            var live = members.edges[0].client.liveQuery("enrolments_by_course", as: CourseEnrolment.self).makeAsyncIterator()
            let first = try #require(try await live.next())
            let enrolledInTwo = try #require(first.first { $0.courseId == 2 }).enrolled
            let student = try #require(try database.execute("INSERT INTO student (first_name, last_name) VALUES ('Ada', 'L') RETURNING id").rows.first?.first ?? nil)
            try database.execute("INSERT INTO enrols_in VALUES ($1, 2)", parameters: [student])
            let second = try #require(try await live.next())
            #expect(second.first { $0.courseId == 2 }?.enrolled == enrolledInTwo + 1)
            let readers = try database.execute("SELECT name FROM pgherald.daemon ORDER BY name").rows.map { $0.first ?? nil }
            #expect(readers == ["db"], "the edge reads no journal: \(readers)")
            _ = try await members.edges[0].stop()
            _ = try await members.database.stop()
        }

        /// One NATS node killed while writers run, then all of NATS stopped:
        /// each edge gets every row once, says it is unhealthy while NATS is
        /// away, and catches up when it returns; the database daemon keeps its cursor.
        @Test func edgesLoseNothingThroughNATSFaults() async throws {
            let database = try TestDatabase.create()
            let nats = try await NATSCluster()
            let members = try await Self.start(database, nats)
            let streams = [
                try await RawStream(socketPath: members.edges[0].socketPath, path: "/events?table=public.course"),
                try await RawStream(socketPath: members.edges[1].socketPath, path: "/events?table=public.course"),
            ]
            let writer = Task.detached {
                for row in 0..<300 {
                    try database.execute("INSERT INTO course (short_code, name) VALUES ($1, 'course')", parameters: ["F\(row)"])
                    try await Task.sleep(for: .milliseconds(5))
                }
            }
            _ = try await streams[0].text(within: 30) { Self.received($0).count >= 60 }
            nats.kill(0)
            try await writer.value
            try await nats.restart(0)
            for stream in streams {
                _ = try await stream.text(within: 90) { Self.received($0).count >= 300 }
            }

            // All of NATS stops: the edges are unhealthy, the rows written meanwhile wait in the journal.
            for node in 0..<3 { nats.kill(node) }
            for edge in members.edges {
                try await waitFor(seconds: 30) { try await edge.get("/healthz").status == 503 } failure: { "an edge without NATS stayed healthy" }
            }
            for row in 300..<350 {
                try database.execute("INSERT INTO course (short_code, name) VALUES ($1, 'course')", parameters: ["F\(row)"])
            }
            for node in 0..<3 { try await nats.restart(node) }
            for (index, stream) in streams.enumerated() {
                _ = try await stream.text(within: 120) { Self.received($0).count >= 350 }
                try await Task.sleep(for: .milliseconds(300))
                #expect(Self.received(stream.received).map(\.code) == Self.codes("F", 0..<350), "edge \(index): every row once, in order")
                try await waitFor(seconds: 30) { try await members.edges[index].get("/healthz").status == 200 }
            }
            for edge in members.edges { _ = try await edge.stop() }
            _ = try await members.database.stop()
        }
    }
}
