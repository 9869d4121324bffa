import Foundation
import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// The leak property over every endpoint but a database daemon's
    /// `/events` (``RowSecurityPathTests`` has those): Supabase bindings with
    /// a filter, a live query run as its subscriber, private channels and
    /// `/events?topic=`, all on a database daemon and on an edge fed through
    /// NATS, each session's truth read by the test as that session
    /// (``SessionPolicyScenario``).
    @Suite(.enabled(if: NATSServer.executable != nil, "scripts/test provides nats-server"))
    struct RowSecurityEndpointTests {
        static let rooms = ["room-ann", "room-ben", "room-cat", "room-all"]

        /// Whether `session` may read `room`, by the policies on `realtime.messages`, as Supabase asks: a message of
        /// the topic is there, and the session selects it with `realtime.topic` set.
        static func mayRead(_ room: String, user: String, session: String, role: String, on connection: LibpqConnection) throws -> Bool {
            let (results, error) = try connection.executeScript("""
                BEGIN;
                INSERT INTO realtime.messages (topic, extension) VALUES ('\(room)', 'broadcast');
                SET LOCAL ROLE \(role);
                SELECT set_config('request.jwt.claims', '\(SessionPolicyScenario.claims(role: role, user: user, session: session))', true);
                SELECT set_config('realtime.topic', '\(room)', true);
                SELECT count(*) FROM realtime.messages WHERE topic = '\(room)';
                ROLLBACK
                """)
            if let error { throw error }
            return results[5].rows.first?[0] == "1"
        }

        /// A daemon's configuration: the Supabase endpoint and the network listener, `role` through row-level
        /// security with the live query `my_notes`, and `more`.
        static func configuration(role: String, realtime: Int, http: Int, more: String) throws -> String {
            try RowSecurityTests.configuration { _ in "" }.withContents { path in
                let secretFile = URL(fileURLWithPath: path).deletingLastPathComponent().appending(path: "endpoint-jwt").path
                try AttackTests.jwtSecret.write(toFile: secretFile, atomically: true, encoding: .utf8)
                return """
                    realtime:
                      listen: 127.0.0.1:\(realtime)
                      jwt:
                        secret_file: \(secretFile)
                        roles:
                          \(role):
                            rls: true
                            queries: [my_notes]
                    http:
                      listen: 127.0.0.1:\(http)
                    queries:
                      my_notes:
                        sql: SELECT id, owner, body FROM note ORDER BY id
                        key: [id]
                        as: subscriber
                    \(more)
                    """
            }
        }

        /// One live session's clients.
        struct Session {
            var user: String
            var session: String
            /// On the database daemon: note changes filtered by `body=like.n%`, task changes whole, and the rooms.
            var supabase: RealtimeTestClient
            /// On the edge: every change, and the rooms.
            var edgeSupabase: RealtimeTestClient
            var edgeEvents: PeerStream
            var topics: PeerStream
            var edgeTopics: PeerStream
            var liveQuery: PeerStream
            /// The rooms each daemon let it join.
            var joined: [String: Set<String>] = [:]
        }

        @Test(arguments: SessionPolicyScenario.cells)
        func everyEndpointGetsExactlyWhatEachSessionCouldSee(_ cell: TriggerCell) async throws {
            let database = try TestDatabase.create(install: false, on: cell.cluster)
            try Installer.install(on: database.connect(), durability: .durable, triggers: cell.triggers)
            let role = RowSecurityTests.makeRole()
            defer { _ = try? database.execute("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
            let seed = UInt64.random(in: 0...UInt64(UInt32.max))
            var scenario = try SessionPolicyScenario(on: database, role: role, seed: seed)
            try RowSecurityTests.createRealtimeMessages(database, role: role)
            // A user's own room and a shared one, never for a revoked session.
            try database.execute("""
                CREATE POLICY rooms ON realtime.messages FOR SELECT TO \(role) USING (
                  extension = 'broadcast'
                  AND realtime.topic() IN ('room-' || (current_setting('request.jwt.claims', true)::json->>'sub'), 'room-all')
                  AND NOT EXISTS (SELECT FROM revoked_session r
                    WHERE r.session_id = current_setting('request.jwt.claims', true)::json->>'session_id'));
                """)

            let nats = try await NATSServer()
            let ports = (realtime: freeLoopbackPort(), http: freeLoopbackPort(), edgeRealtime: freeLoopbackPort(), edgeHTTP: freeLoopbackPort())
            let source = try await SocketDaemon(database: database, arguments: ["--name", "db", "--config", try Self.configuration(
                role: role, realtime: ports.realtime, http: ports.http, more: """
                    nats:
                      servers: [\(nats.url)]
                      stream: PGHERALD
                      create_stream: true
                    cluster:
                      name: rls
                      nats: [\(nats.url)]
                      member: db
                    """
            )])
            try await waitFor(seconds: 30) { try await source.statistics().outputs?["nats"]?.health == "ok" } failure: { "the nats output" }
            let edge = try await SocketDaemon(database: database, arguments: ["--name", "edge", "--config", try Self.configuration(
                role: role, realtime: ports.edgeRealtime, http: ports.edgeHTTP, more: """
                    source: nats
                    cluster:
                      name: rls
                      nats: [\(nats.url)]
                      member: edge
                      stream: PGHERALD
                    """
            )])
            try await waitFor(seconds: 30) { try await edge.statistics().listener.state == "listening" } failure: { "the edge did not start reading" }
            let onSource = AttackTests.Target(daemon: source, port: ports.http, role: role, config: "")
            let onEdge = AttackTests.Target(daemon: edge, port: ports.edgeHTTP, role: role, config: "")

            let reader = try database.connect()
            let writer = try database.connect()
            let topics = "/events?topic=\(Self.rooms.joined(separator: ","))&format=ndjson"
            var sessions: [Session] = []
            for user in SessionPolicyScenario.users {
                for session in SessionPolicyScenario.sessions(of: user).prefix(2) {
                    // A session and a token id per device, as Supabase's tokens carry: one cohort each.
                    let token = onSource.token(#""sub":"\#(user)","session_id":"\#(session)","jti":"\#(session)-token""#)
                    var live = Session(
                        user: user, session: session,
                        supabase: try await RealtimeTestClient(port: ports.realtime, apikey: token),
                        edgeSupabase: try await RealtimeTestClient(port: ports.edgeRealtime, apikey: token),
                        edgeEvents: try onEdge.stream("/events?table=note&where=body.like.n%25&format=ndjson", token: token),
                        topics: try onSource.stream(topics, token: token),
                        edgeTopics: try onEdge.stream(topics, token: token),
                        liveQuery: try onSource.stream("/queries/my_notes?format=ndjson", token: token)
                    )
                    try await RealtimeTests.join(live.supabase, topic: "realtime:changes", bindings: """
                        {"event":"*","schema":"public","table":"note","filter":"body=like.n%"},{"event":"*","schema":"public","table":"task"}
                        """, token: token)
                    try await RealtimeTests.join(live.edgeSupabase, topic: "realtime:changes", bindings: """
                        {"event":"*","schema":"public","table":"note"},{"event":"*","schema":"public","table":"task"}
                        """, token: token)
                    for (daemon, client) in [("db", live.supabase), ("edge", live.edgeSupabase)] {
                        for (index, room) in Self.rooms.enumerated() {
                            let ref = "room\(index)"
                            try await client.send(joinRef: ref, ref: ref, topic: "realtime:\(room)", event: "phx_join", payload: RowSecurityTests.privateJoin(room, token: token))
                            let reply = try await client.next(within: 10, "\(session)'s join of \(room) on \(daemon)") { $0.event == "phx_reply" && $0.ref == .string(ref) }
                            if reply.payload["status"] == .string("ok") { live.joined[daemon, default: []].insert(room) }
                        }
                    }
                    sessions.append(live)
                }
            }
            var mismatches: [String] = []
            for live in sessions {
                let readable = try Set(Self.rooms.filter { try Self.mayRead($0, user: live.user, session: live.session, role: role, on: reader) })
                for daemon in ["db", "edge"] where live.joined[daemon, default: []] != readable {
                    mismatches.append("\(live.session) joined \(live.joined[daemon, default: []].sorted()) on \(daemon), may read \(readable.sorted())")
                }
            }
            try await source.waitForSubscribers(sessions.count, kind: "ndjson")
            try await edge.waitForSubscribers(sessions.count * 2, kind: "ndjson")
            for live in sessions { try await live.liveQuery.wait(within: 15) { $0.contains("\"result\"") } }

            let everySession = sessions.map { (user: $0.user, session: $0.session) }
            func views() throws -> [String: [String: String]] {
                try Dictionary(uniqueKeysWithValues: everySession.map {
                    ($0.session, try scenario.visibleRows(as: $0.user, session: $0.session, on: reader))
                })
            }
            var expected: [String: [String]] = [:]
            var broadcasts: [String: [String]] = [:]
            var everSeen: [String: Set<String>] = [:]
            var after = try views()
            for step in 0..<40 {
                let before = after
                for (session, rows) in before { everSeen[session, default: []].formUnion(rows.map { "\($0.key) \($0.value)" }) }
                var next = try scenario.step(step, membership: true, on: writer)
                // A broadcast into a room at random, in the same transaction: delivered on its commit.
                let room = Self.rooms[scenario.random.next(upTo: Self.rooms.count)]
                let sends = scenario.random.next(upTo: 3) == 0
                if sends { next.statements.append("SELECT pgherald.send('{\"step\":\(step)}', 'say', '\(room)', true)") }
                guard !next.statements.isEmpty else { continue }
                // Policies read team_member when a daemon checks: a change to it waits for the checks of what came before.
                if next.changesMembership { try await Task.sleep(for: .milliseconds(500)) }
                try writer.execute(next.script)
                after = try views()
                for live in sessions {
                    expected[live.session, default: []] += SessionPolicyScenario.expected(next.touches, before: before[live.session]!, after: after[live.session]!)
                    if sends, !next.rolledBack, live.joined["db", default: []].contains(room) { broadcasts[live.session, default: []].append("\(room) \(step)") }
                }
            }
            for (session, rows) in after { everSeen[session, default: []].formUnion(rows.map { "\($0.key) \($0.value)" }) }

            func changes(_ client: RealtimeTestClient, _ name: String, wanted: [String]) async -> [String] {
                let received = (try? await client.takeChanges(wanted.count, topic: "realtime:changes", within: 15)) ?? []
                let leak = received.contains { $0.jsonText.contains("secret") } ? ["a secret column"] : []
                return received.map(SessionPolicyScenario.summary) + leak
            }
            func events(_ stream: PeerStream, count: Int) async throws -> [Event] {
                _ = try? await stream.wait(within: 15) { $0.split(separator: "\n").filter { $0.contains("\"op\":") }.count >= count }
                return try stream.text.split(separator: "\n").filter { $0.contains("\"op\":") }.map { try Event(payload: String($0)) }
            }
            for live in sessions {
                let wanted = expected[live.session, default: []]
                let filtered = wanted.filter { $0.contains(" task ") || SessionPolicyScenario.passesFilter($0) }
                let got = await changes(live.supabase, "db", wanted: filtered)
                if got != filtered { mismatches.append("\(live.session) on db's endpoint, filter body=like.n%: expected \(filtered), got \(got)") }
                let gotOnEdge = await changes(live.edgeSupabase, "edge", wanted: wanted)
                if gotOnEdge != wanted { mismatches.append("\(live.session) on the edge's endpoint: expected \(wanted), got \(gotOnEdge)") }
                let notes = wanted.filter(SessionPolicyScenario.passesFilter)
                let edgeEvents = try await events(live.edgeEvents, count: notes.count).map(SessionPolicyScenario.summary)
                if edgeEvents != notes { mismatches.append("\(live.session) on the edge's /events, where=body.like.n%: expected \(notes), got \(edgeEvents)") }
                if live.edgeEvents.text.contains("secret") { mismatches.append("\(live.session) on the edge's /events: a secret column") }

                // Private rooms: on the channels joined, and on /events?topic= of every room, only what the session may read.
                let said = broadcasts[live.session, default: []]
                for (daemon, client) in [("db", live.supabase), ("edge", live.edgeSupabase)] {
                    var heard: [String] = []
                    for _ in said {
                        guard let message = try? await client.next(within: 15, where: { $0.event == "broadcast" }) else { break }
                        heard.append("\(message.topic.dropFirst("realtime:".count)) \(message.payload["payload"]?["step"]?.jsonText ?? "?")")
                    }
                    // Channels are independent, as Phoenix's are: the order holds within a room.
                    func byRoom(_ messages: [String]) -> [Substring: [String]] { Dictionary(grouping: messages) { $0.prefix { $0 != " " } } }
                    if byRoom(heard) != byRoom(said) { mismatches.append("\(live.session)'s private channels on \(daemon): expected \(said), got \(heard)") }
                }
                for (daemon, stream) in [("db", live.topics), ("edge", live.edgeTopics)] {
                    let read = try await events(stream, count: said.count).map { "\($0.table.name) \($0.new?["payload"]?["step"]?.jsonText ?? "?")" }
                    if read != said { mismatches.append("\(live.session)'s /events?topic= on \(daemon): expected \(said), got \(read)") }
                }

                // The live query: its last state is the session's notes, and no frame held a row the session never saw.
                let lastNotes = Set(after[live.session, default: [:]].filter { $0.key.hasPrefix("note ") }.map { "\($0.key) \($0.value)" })
                var state: [String: String] = [:]
                func apply(_ text: String) {
                    state = [:]
                    for line in text.split(separator: "\n") {
                        guard let frame = try? JSONParser.parse(String(line)) else { continue }
                        if frame["type"] == .string("result") { state = [:] }
                        for key in ["rows", "added", "changed"] {
                            guard case .array(let rows)? = frame[key] else { continue }
                            for row in rows {
                                let id = row["id"].map(\.jsonText) ?? "?"
                                let shown = "note \(id) \(SessionPolicyScenario.values(table: "note") { row[$0] })"
                                state[id] = shown
                                if !everSeen[live.session, default: []].contains(shown) { mismatches.append("\(live.session)'s live query showed \(shown)") }
                            }
                        }
                        if case .array(let removed)? = frame["removed"] {
                            for row in removed { state[row["id"].map(\.jsonText) ?? "?"] = nil }
                        }
                    }
                }
                _ = try? await live.liveQuery.wait(within: 15) { text in
                    apply(text)
                    return Set(state.values) == lastNotes
                }
                apply(live.liveQuery.text)
                if Set(state.values) != lastNotes { mismatches.append("\(live.session)'s live query ends with \(state.values.sorted()), sees \(lastNotes.sorted())") }
                if live.liveQuery.text.contains("secret") { mismatches.append("\(live.session)'s live query: a secret column") }
            }
            try await Task.sleep(for: .milliseconds(300))
            for live in sessions {
                for (daemon, client) in [("db", live.supabase), ("edge", live.edgeSupabase)] {
                    let more = client.unreadMessages.filter { $0.event == "postgres_changes" || $0.event == "broadcast" }
                    if !more.isEmpty { mismatches.append("\(live.session) on \(daemon): more than expected: \(more.map { "\($0.topic) \($0.payload.jsonText)" })") }
                }
            }
            for daemon in [source, edge] {
                let cohorts = try await daemon.statistics().rowSecurity?.cohorts
                if cohorts != sessions.count { mismatches.append("\(cohorts.map(String.init) ?? "no") cohorts for \(sessions.count) sessions") }
            }
            cell.report("RowSecurityEndpointTests", passed: mismatches.isEmpty ? 1 : 0, total: 1)
            #expect(mismatches.isEmpty, "seed \(seed): \(Set(mismatches).sorted().joined(separator: "\n"))")
            for live in sessions {
                await live.supabase.close()
                await live.edgeSupabase.close()
            }
            _ = try await edge.stop()
            _ = try await source.stop()
        }
    }
}

extension String {
    /// Writes what `contents` makes of this path into the file at it, and returns the path.
    fileprivate func withContents(_ contents: (String) throws -> String) throws -> String {
        try contents(self).write(toFile: self, atomically: true, encoding: .utf8)
        return self
    }
}
