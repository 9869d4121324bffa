import Foundation
import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// Row-level security decides what each subscriber receives: Supabase
    /// clients with user tokens, against real policies.
    @Suite
    struct RowSecurityTests {
        static let jwtSecret = "row-security-jwt-secret-with-at-least-32-characters"

        /// A role of this test's own (roles are the cluster's, shared by parallel tests).
        static func makeRole() -> String { "member_\(UInt32.random(in: 0...UInt32.max))" }

        /// `text` as a configuration file in a folder of its own, with the JWT secret beside it (`jwt`).
        static func configuration(_ text: (_ secretFile: String) -> String) throws -> String {
            let directory = FileManager.default.temporaryDirectory.appending(path: "pgherald-rls-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let secretFile = directory.appending(path: "jwt").path
            try jwtSecret.write(toFile: secretFile, atomically: true, encoding: .utf8)
            let path = directory.appending(path: "pgherald.yaml").path
            try text(secretFile).write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }

        /// An access rule that gives the socket peer `user` the row-level security of `role` with claims `{"sub": sub}`.
        static func rule(_ name: String, user: UInt32, role: String, sub: String, granting grants: String = "") -> String {
            """
              \(name):
                user: \(user)
                rls: true
                role: \(role)
                claims: '{"sub": "\(sub)"}'\(grants.isEmpty ? "" : "\n    " + grants)
            """
        }

        /// A daemon whose tokens of `role` are checked by row-level security.
        static func start(_ database: TestDatabase, role: String) async throws -> (daemon: SocketDaemon, port: Int) {
            let port = freeLoopbackPort()
            let config = try configuration { secretFile in
                """
                realtime:
                  listen: 127.0.0.1:\(port)
                  jwt:
                    secret_file: \(secretFile)
                    roles:
                      \(role):
                        rls: true
                """
            }
            return (try await SocketDaemon(database: database, arguments: ["--config", config]), port)
        }

        static func token(role: String, sub: String) -> String {
            makeToken(#"{"role":"\#(role)","sub":"\#(sub)","exp":\#(Int(Date().timeIntervalSince1970) + 3600)}"#, secret: jwtSecret)
        }

        /// A client of user `sub` joined to every change of `table`.
        static func subscriber(port: Int, role: String, sub: String, table: String) async throws -> RealtimeTestClient {
            let token = token(role: role, sub: sub)
            let client = try await RealtimeTestClient(port: port, apikey: token)
            try await RealtimeTests.join(
                client, topic: "realtime:\(sub)", bindings: #"{"event":"*","schema":"public","table":"\#(table)"}"#, token: token
            )
            return client
        }

        /// `todo`, whose rows each user sees by owner, with a column no member may select.
        static func createTodos(_ database: TestDatabase, role: String) throws {
            try database.execute("""
                CREATE ROLE \(role) NOLOGIN;
                CREATE TABLE todo (id int PRIMARY KEY, owner text NOT NULL, title text, secret text);
                ALTER TABLE todo ENABLE ROW LEVEL SECURITY;
                GRANT SELECT (id, owner, title) ON todo TO \(role);
                CREATE POLICY own ON todo FOR SELECT TO \(role)
                  USING (owner = current_setting('request.jwt.claims', true)::json->>'sub');
                """)
        }

        static func summary(_ change: JSONValue) -> String {
            let data = change["data"]
            let row = data?["type"] == .string("DELETE") ? data?["old_record"] : data?["record"]
            return "\(data?["type"]?.stringValue ?? "?") \(row?["id"].map(\.jsonText) ?? "?")"
        }

        @Test func eachUserSeesExactlyTheirRowsIncludingDeletesAndRowsLeavingTheirView() async throws {
            let database = try TestDatabase.create()
            let role = Self.makeRole()
            defer { _ = try? database.execute("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
            try Self.createTodos(database, role: role)
            let (daemon, port) = try await Self.start(database, role: role)
            let alice = try await Self.subscriber(port: port, role: role, sub: "alice", table: "todo")
            let bob = try await Self.subscriber(port: port, role: role, sub: "bob", table: "todo")
            try await daemon.waitForSubscribers(2, kind: "realtime")

            try database.execute("INSERT INTO todo VALUES (1, 'alice', 'milk', 's1'), (2, 'bob', 'bread', 's2')")
            try database.execute("UPDATE todo SET owner = 'bob' WHERE id = 1")
            try database.execute("UPDATE todo SET title = 'oat milk' WHERE id = 1")
            try database.execute("DELETE FROM todo WHERE id = 1")
            try database.execute("DELETE FROM todo WHERE id = 2")
            try database.execute("INSERT INTO todo VALUES (3, 'alice', 'eggs', 's3')")

            let seenByAlice = try await alice.takeChanges(3, topic: "realtime:alice")
            let seenByBob = try await bob.takeChanges(5, topic: "realtime:bob")
            #expect(seenByAlice.map(Self.summary) == ["INSERT 1", "DELETE 1", "INSERT 3"])
            #expect(seenByBob.map(Self.summary) == ["INSERT 2", "UPDATE 1", "UPDATE 1", "DELETE 1", "DELETE 2"])
            // The row leaving alice's view is a DELETE of its old row; the row coming into bob's has no old row of alice's.
            #expect(seenByAlice[1]["data"]?["old_record"]?["owner"] == .string("alice"))
            #expect(seenByBob[1]["data"]?["old_record"] == .object([:]))
            // The column no member may select is in no record and no column list.
            for change in seenByAlice + seenByBob {
                #expect(!change.jsonText.contains("secret") && !change.jsonText.contains("\"s1\""), "\(change.jsonText)")
            }
            try await Task.sleep(for: .milliseconds(300))
            #expect(!alice.unread.contains { $0.contains("postgres_changes") }, "\(alice.unread)")
            #expect(!bob.unread.contains { $0.contains("postgres_changes") }, "\(bob.unread)")
            await alice.close()
            await bob.close()
        }

        @Test func aPolicyThatRaisesForOneUserEndsOnlyThatUsersChannel() async throws {
            let database = try TestDatabase.create()
            let role = Self.makeRole()
            defer { _ = try? database.execute("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
            try Self.createTodos(database, role: role)
            try database.execute("""
                CREATE POLICY fragile ON todo FOR SELECT TO \(role) USING (
                  1 / CASE WHEN current_setting('request.jwt.claims', true)::json->>'sub' = 'carol' THEN length(owner) - length(owner) ELSE 1 END = 0
                )
                """)
            let (daemon, port) = try await Self.start(database, role: role)
            let alice = try await Self.subscriber(port: port, role: role, sub: "alice", table: "todo")
            let carol = try await Self.subscriber(port: port, role: role, sub: "carol", table: "todo")
            let bob = try await Self.subscriber(port: port, role: role, sub: "bob", table: "todo")
            try await daemon.waitForSubscribers(3, kind: "realtime")

            try database.execute("INSERT INTO todo VALUES (1, 'alice', 'milk', NULL), (2, 'bob', 'bread', NULL)")
            let ended = try await carol.next(within: 10, "carol's system error") {
                $0.topic == "realtime:carol" && $0.event == "system" && $0.payload["status"] == .string("error")
            }
            #expect(ended.payload["message"]?.stringValue?.contains("division by zero") == true, "\(ended.payload.jsonText)")
            #expect(try await alice.takeChanges(1, topic: "realtime:alice").map(Self.summary) == ["INSERT 1"])
            #expect(try await bob.takeChanges(1, topic: "realtime:bob").map(Self.summary) == ["INSERT 2"])
            // The others go on receiving.
            try database.execute("INSERT INTO todo VALUES (3, 'alice', 'eggs', NULL)")
            #expect(try await alice.takeChanges(1, topic: "realtime:alice").map(Self.summary) == ["INSERT 3"])
            await alice.close()
            await bob.close()
            await carol.close()
        }

        @Test func aPushedTokenWithOtherClaimsMovesTheChannelToItsNewCohort() async throws {
            let database = try TestDatabase.create()
            let role = Self.makeRole()
            defer { _ = try? database.execute("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
            try Self.createTodos(database, role: role)
            let (daemon, port) = try await Self.start(database, role: role)
            let client = try await Self.subscriber(port: port, role: role, sub: "alice", table: "todo")
            try await daemon.waitForSubscribers(1, kind: "realtime")
            try database.execute("INSERT INTO todo VALUES (1, 'alice', 'milk', NULL), (2, 'bob', 'bread', NULL)")
            #expect(try await client.takeChanges(1, topic: "realtime:alice").map(Self.summary) == ["INSERT 1"])

            // The same channel, now signed in as bob.
            let bob = Self.token(role: role, sub: "bob")
            try await client.send(joinRef: "1", ref: "2", topic: "realtime:alice", event: "access_token", payload: #"{"access_token":"\#(bob)"}"#)
            try await waitFor(seconds: 10) {
                try await daemon.statistics().rowSecurity?.cohorts == 2
            } failure: { "the channel did not move to bob's cohort" }
            try await Task.sleep(for: .milliseconds(200))
            try database.execute("INSERT INTO todo VALUES (3, 'alice', 'eggs', NULL), (4, 'bob', 'jam', NULL)")
            #expect(try await client.takeChanges(1, topic: "realtime:alice").map(Self.summary) == ["INSERT 4"])
            try await Task.sleep(for: .milliseconds(300))
            #expect(!client.unread.contains { $0.contains("postgres_changes") }, "\(client.unread)")
            await client.close()
        }

        @Test func checkConfigSaysWhichGrantTheDaemonsRoleLacks() async throws {
            let database = try TestDatabase.create()
            let role = Self.makeRole()
            let daemonRole = "pgherald_\(role)"
            defer { _ = try? database.execute("DROP OWNED BY \(daemonRole); DROP ROLE IF EXISTS \(role); DROP ROLE IF EXISTS \(daemonRole)") }
            let config = try Self.configuration { secretFile in
                """
                database: "\(database.connInfo) user=\(daemonRole)"
                realtime:
                  jwt:
                    secret_file: \(secretFile)
                    roles:
                      \(role):
                        rls: true
                """
            }
            try database.execute("CREATE ROLE \(daemonRole) LOGIN")
            // A daemon role of its own, granted what serve needs in the pgherald schema; the roles it checks as are this test's.
            try Installer.install(on: database.connect(), daemonRoles: [daemonRole])

            let missing = try await DaemonProcess(["check-config", config, "--connect"]).finish()
            #expect(missing.status == 78 && missing.stderr.contains("role \(role): no such role"), "\(missing.stderr)")
            try database.execute("CREATE ROLE \(role) NOLOGIN")
            let ungranted = try await DaemonProcess(["check-config", config, "--connect"]).finish()
            #expect(ungranted.status == 78 && ungranted.stderr.contains("run GRANT \(role) TO \(daemonRole)"), "\(ungranted.stderr)")
            try database.execute("GRANT \(role) TO \(daemonRole)")
            let granted = try await DaemonProcess(["check-config", config, "--connect"]).finish()
            #expect(granted.status == 0 && granted.stdout.contains("# rls: the daemon may check as \(role)"), "\(granted.stdout)\(granted.stderr)")
        }

        /// The database's owner, no superuser, installs pgherald and runs the
        /// daemon; it needs only membership of the role it checks as.
        @Test func noSuperuserIsNeededAtRunTime() async throws {
            let database = try TestDatabase.create(enrolment: false, install: false)
            let role = Self.makeRole()
            let owner = "owner_\(role)"
            defer { _ = try? database.execute("DROP DATABASE IF EXISTS \(database.name) WITH (FORCE); DROP ROLE IF EXISTS \(role); DROP ROLE IF EXISTS \(owner)") }
            try database.execute("""
                CREATE ROLE \(owner) LOGIN NOSUPERUSER; ALTER DATABASE \(database.name) OWNER TO \(owner);
                ALTER SCHEMA public OWNER TO \(owner); CREATE ROLE \(role) NOLOGIN; GRANT \(role) TO \(owner)
                """)
            let asOwner = TestDatabase(name: database.name, connInfo: "\(database.connInfo) user=\(owner)")
            try asOwner.execute("""
                CREATE TABLE todo (id int PRIMARY KEY, owner text NOT NULL, title text, secret text);
                ALTER TABLE todo ENABLE ROW LEVEL SECURITY;
                GRANT SELECT (id, owner, title) ON todo TO \(role);
                CREATE POLICY own ON todo FOR SELECT TO \(role) USING (owner = current_setting('request.jwt.claims', true)::json->>'sub');
                """)
            let installed = try await DaemonProcess(["install", "--db", asOwner.connInfo]).finish()
            #expect(installed.status == 0, "\(installed.stderr)")
            let (daemon, port) = try await Self.start(asOwner, role: role)
            let alice = try await Self.subscriber(port: port, role: role, sub: "alice", table: "todo")
            let bob = try await Self.subscriber(port: port, role: role, sub: "bob", table: "todo")
            try await daemon.waitForSubscribers(2, kind: "realtime")
            try asOwner.execute("INSERT INTO todo VALUES (1, 'alice', 'milk', 's'), (2, 'bob', 'bread', 's'); DELETE FROM todo WHERE id = 1")
            #expect(try await alice.takeChanges(2, topic: "realtime:alice").map(Self.summary) == ["INSERT 1", "DELETE 1"])
            #expect(try await bob.takeChanges(1, topic: "realtime:bob").map(Self.summary) == ["INSERT 2"])
            try await Task.sleep(for: .milliseconds(300))
            #expect(!alice.unread.contains { $0.contains("postgres_changes") } && !bob.unread.contains { $0.contains("postgres_changes") })
            await alice.close()
            await bob.close()
            try await daemon.stop()
        }

        @Test func thePythonClientSignedInAsTwoUsersSeesOnlyTheirRows() async throws {
            let python = try #require(ProcessInfo.processInfo.environment["PGHERALD_TEST_REALTIME_PYTHON"], "scripts/test sets it")
            let database = try TestDatabase.create()
            let role = Self.makeRole()
            defer { _ = try? database.execute("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
            try Self.createTodos(database, role: role)
            let (daemon, port) = try await Self.start(database, role: role)
            let script = TestDatabase.repositoryRoot.appending(path: "tests/realtime/row_security_test.py").path
            let client = try DaemonProcess(
                [
                    script, "--port", String(port), "--alice", Self.token(role: role, sub: "alice"), "--bob", Self.token(role: role, sub: "bob"),
                    "--dsn", database.connInfo,
                ],
                executable: URL(fileURLWithPath: python)
            )
            let result = try await client.finish(within: 60)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.hasSuffix("OK\n"), "\(result.stdout)")
            _ = try await daemon.stop()
        }

        /// Socket peers under access rules with `rls: true`: `/events` of
        /// each gets its own rows, a row leaving its view as `left_view`,
        /// and a resume from the journal judged the same way.
        @Test func socketPeersUnderRowSecurityRulesGetTheirRowsOnEvents() async throws {
            let database = try TestDatabase.create()
            let role = Self.makeRole()
            defer { _ = try? database.execute("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
            try Self.createTodos(database, role: role)
            let (alice, bob): (UInt32, UInt32) = (60011, 60012)
            let config = try Self.configuration { _ in
                """
                socket:
                  mode: "666"
                access:
                \(Self.rule("alice", user: alice, role: role, sub: "alice"))
                \(Self.rule("bob", user: bob, role: role, sub: "bob", granting: "tables: [public.todo]"))
                """
            }
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            let asAlice = PeerClient(userID: alice, groupID: alice, socketPath: daemon.socketPath)
            let asBob = PeerClient(userID: bob, groupID: bob, socketPath: daemon.socketPath)
            let grouped = try await asAlice.get("/events?group=transaction")
            #expect(grouped.status == 400 && grouped.body.contains("row-level security"), "\(grouped)")
            let aliceStream = try asAlice.stream("/events?table=todo&format=ndjson")
            let bobStream = try asBob.stream("/events?table=todo&format=ndjson")
            try await daemon.waitForSubscribers(2, kind: "ndjson")

            try database.execute("INSERT INTO todo VALUES (1, 'alice', 'milk', 's1'), (2, 'bob', 'bread', 's2')")
            try database.execute("UPDATE todo SET owner = 'bob' WHERE id = 1")
            let aliceSaw = try await aliceStream.wait { $0.split(separator: "\n").count >= 2 }
            let bobSaw = try await bobStream.wait { $0.split(separator: "\n").count >= 2 }
            let aliceEvents = try aliceSaw.split(separator: "\n").map { try Event(payload: String($0)) }
            let bobEvents = try bobSaw.split(separator: "\n").map { try Event(payload: String($0)) }
            #expect(aliceEvents.map { "\($0.operation) \($0.primaryKey?["id"]?.jsonText ?? "?")" } == ["INSERT 1", "UPDATE 1"])
            #expect(aliceEvents.last?.leftView == true && aliceEvents.last?.new == nil && aliceEvents.last?.old?["owner"] == .string("alice"))
            #expect(bobEvents.map { "\($0.operation) \($0.primaryKey?["id"]?.jsonText ?? "?")" } == ["INSERT 2", "UPDATE 1"])
            #expect(bobEvents.last?.old == [:] && bobEvents.last?.leftView == false)
            #expect(!aliceSaw.contains("s1") && !bobSaw.contains("s2") && !aliceSaw.contains("secret"), "\(aliceSaw)\n\(bobSaw)")

            // A resume from the start of the journal is judged as the live events were.
            let first = try #require(aliceEvents.first?.id)
            _ = try await daemon.stop()
            let restarted = try await SocketDaemon(database: database, socketPath: daemon.socketPath, arguments: ["--config", config])
            let resumed = try asAlice.stream("/events?table=todo&format=ndjson&since=\(first)")
            let replayed = try await resumed.wait { $0.split(separator: "\n").count >= 1 }
            try await Task.sleep(for: .milliseconds(300))
            let replayedEvents = try resumed.text.split(separator: "\n").map { try Event(payload: String($0)) }
            #expect(replayedEvents.map { "\($0.operation) \($0.leftView)" } == ["UPDATE true"], "\(replayed)")
            _ = try await restarted.stop()
        }

        /// A live query declared `as: subscriber` runs with each subscriber's
        /// role and claims: the policies decide its rows, no table-wide grant
        /// is needed, and one user on two streams is one evaluation.
        @Test func aLiveQueryRunsAsItsSubscriber() async throws {
            let database = try TestDatabase.create()
            let role = Self.makeRole()
            defer { _ = try? database.execute("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
            try Self.createTodos(database, role: role)
            try database.execute("INSERT INTO todo VALUES (1, 'alice', 'milk', 's1'), (2, 'bob', 'bread', 's2'), (3, 'alice', 'eggs', 's3')")
            let (alice, bob): (UInt32, UInt32) = (60021, 60022)
            let config = try Self.configuration { _ in
                """
                socket:
                  mode: "666"
                queries:
                  my_todos:
                    sql: SELECT id, title FROM todo ORDER BY id
                    key: [id]
                    as: subscriber
                  all_todos:
                    sql: SELECT id, title FROM todo ORDER BY id
                    key: [id]
                access:
                \(Self.rule("alice", user: alice, role: role, sub: "alice", granting: "queries: [my_todos, all_todos]"))
                \(Self.rule("bob", user: bob, role: role, sub: "bob", granting: "queries: [my_todos]"))
                """
            }
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            let asAlice = PeerClient(userID: alice, groupID: alice, socketPath: daemon.socketPath)
            let asBob = PeerClient(userID: bob, groupID: bob, socketPath: daemon.socketPath)
            // A query that runs as the daemon would show every row: it needs a table-wide grant, which alice lacks.
            let wide = try await asAlice.get("/queries/all_todos")
            #expect(wide.status == 403 && wide.body.contains("todo"), "\(wide)")

            let aliceStreams = [try asAlice.stream("/queries/my_todos?format=ndjson"), try asAlice.stream("/queries/my_todos?format=ndjson")]
            let bobStream = try asBob.stream("/queries/my_todos?format=ndjson")
            func frames(_ stream: PeerStream) -> [JSONValue] {
                stream.text.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
            }
            func ids(_ rows: JSONValue?) -> [String] {
                guard case .array(let rows)? = rows else { return [] }
                return rows.map { $0["id"]?.jsonText ?? "?" }
            }
            for stream in aliceStreams + [bobStream] { try await stream.wait { !$0.isEmpty } }
            for stream in aliceStreams { #expect(ids(frames(stream).first?["rows"]) == ["1", "3"], "\(stream.text)") }
            #expect(ids(frames(bobStream).first?["rows"]) == ["2"], "\(bobStream.text)")
            #expect(!aliceStreams[0].text.contains("bread") && !bobStream.text.contains("milk"))

            // Row 1 goes to bob: it leaves alice's result and enters bob's.
            try database.execute("UPDATE todo SET owner = 'bob' WHERE id = 1")
            try await aliceStreams[0].wait { $0.split(separator: "\n").count >= 2 }
            try await bobStream.wait { $0.split(separator: "\n").count >= 2 }
            #expect(frames(aliceStreams[0]).last?["removed"] == .array([.object(["id": .number(JSONNumber(1))])]), "\(aliceStreams[0].text)")
            #expect(ids(frames(bobStream).last?["added"]) == ["1"], "\(bobStream.text)")
            let figures = try #require(try await daemon.statistics().queries?["my_todos"])
            #expect(figures.parameterSets == 2 && figures.subscribers == 3, "\(figures)")
            _ = try await daemon.stop()
        }

        /// Supabase's `realtime.messages` and `realtime.topic()`, as
        /// docs/supabase.md gives them for a database that has none.
        static func createRealtimeMessages(_ database: TestDatabase, role: String) throws {
            try database.execute("""
                CREATE SCHEMA IF NOT EXISTS realtime;
                CREATE TABLE IF NOT EXISTS realtime.messages (
                  id uuid PRIMARY KEY DEFAULT gen_random_uuid(), topic text NOT NULL, extension text NOT NULL, payload jsonb, event text,
                  private boolean DEFAULT false, updated_at timestamp NOT NULL DEFAULT now(), inserted_at timestamp NOT NULL DEFAULT now());
                ALTER TABLE realtime.messages ENABLE ROW LEVEL SECURITY;
                CREATE OR REPLACE FUNCTION realtime.topic() RETURNS text LANGUAGE sql STABLE
                  AS $$ SELECT nullif(current_setting('realtime.topic', true), '') $$;
                SELECT pgherald.exclude('realtime.messages');
                GRANT USAGE ON SCHEMA realtime TO \(role);
                GRANT SELECT, INSERT ON realtime.messages TO \(role);
                """)
        }

        static func privateJoin(_ topic: String, token: String) -> String {
            #"{"config":{"broadcast":{"ack":true,"self":false},"presence":{"key":"","enabled":false},"postgres_changes":[],"private":true},"access_token":"\#(token)"}"#
        }

        @Test func aPrivateChannelFollowsThePoliciesOnRealtimeMessages() async throws {
            let database = try TestDatabase.create()
            let role = Self.makeRole()
            defer { _ = try? database.execute("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
            try Self.createTodos(database, role: role)
            try Self.createRealtimeMessages(database, role: role)
            let (daemon, port) = try await Self.start(database, role: role)
            let token = Self.token(role: role, sub: "alice")
            let alice = try await RealtimeTestClient(port: port, apikey: token)
            try await alice.send(joinRef: "1", ref: "1", topic: "realtime:room-1", event: "phx_join", payload: Self.privateJoin("room-1", token: token))
            let refused = try await alice.next(within: 10, "the refusal") { $0.event == "phx_reply" && $0.ref == .string("1") }
            #expect(refused.payload["status"] == .string("error"))
            #expect(refused.payload["response"]?["reason"]?.stringValue?.contains("permissions to read from this Channel topic: room-1") == true, "\(refused.payload.jsonText)")

            try database.execute("""
                CREATE POLICY room_readers ON realtime.messages FOR SELECT TO \(role) USING (
                  realtime.topic() = 'room-1' AND extension = 'broadcast'
                  AND current_setting('request.jwt.claims', true)::json->>'sub' IN ('alice', 'ann'));
                CREATE POLICY room_writers ON realtime.messages FOR INSERT TO \(role) WITH CHECK (
                  realtime.topic() = 'room-1' AND extension = 'broadcast' AND current_setting('request.jwt.claims', true)::json->>'sub' = 'alice');
                """)
            let renewed = Self.token(role: role, sub: "alice")
            try await alice.send(joinRef: "2", ref: "2", topic: "realtime:room-1", event: "phx_join", payload: Self.privateJoin("room-1", token: renewed))
            let joined = try await alice.next(within: 10, "alice's join") { $0.event == "phx_reply" && $0.ref == .string("2") }
            #expect(joined.payload["status"] == .string("ok"), "\(joined.payload.jsonText)")
            let annToken = Self.token(role: role, sub: "ann")
            let ann = try await RealtimeTestClient(port: port, apikey: annToken)
            try await ann.send(joinRef: "1", ref: "1", topic: "realtime:room-1", event: "phx_join", payload: Self.privateJoin("room-1", token: annToken))
            let annJoined = try await ann.next(within: 10, "ann's join") { $0.event == "phx_reply" && $0.ref == .string("1") }
            #expect(annJoined.payload["status"] == .string("ok"), "\(annJoined.payload.jsonText)")

            // alice may send, ann may only read; neither may track presence.
            try await alice.send(joinRef: "2", ref: "3", topic: "realtime:room-1", event: "broadcast", payload: #"{"type":"broadcast","event":"hello","payload":{"from":"alice"}}"#)
            let heard = try await ann.next(within: 10, "alice's broadcast") { $0.event == "broadcast" }
            #expect(heard.payload["payload"]?["from"] == .string("alice"))
            try await ann.send(joinRef: "1", ref: "2", topic: "realtime:room-1", event: "broadcast", payload: #"{"type":"broadcast","event":"hello","payload":{"from":"ann"}}"#)
            let annRefused = try await ann.next(within: 10, "ann's refusal") { $0.event == "phx_reply" && $0.ref == .string("2") }
            #expect(annRefused.payload["response"]?["reason"]?.stringValue?.contains("permissions to write") == true, "\(annRefused.payload.jsonText)")
            try await alice.send(joinRef: "2", ref: "4", topic: "realtime:room-1", event: "presence", payload: #"{"type":"presence","event":"track","payload":{"online":true}}"#)
            let untracked = try await alice.next(within: 10, "the presence refusal") { $0.event == "phx_reply" && $0.ref == .string("4") }
            #expect(untracked.payload["response"]?["reason"]?.stringValue?.contains("track presence") == true, "\(untracked.payload.jsonText)")

            // The policy changes; ann's next token is checked against it, and her channel ends.
            try database.execute("ALTER POLICY room_readers ON realtime.messages USING (realtime.topic() = 'room-1' AND current_setting('request.jwt.claims', true)::json->>'sub' = 'alice')")
            try await ann.send(joinRef: "1", ref: "3", topic: "realtime:room-1", event: "access_token", payload: #"{"access_token":"\#(Self.token(role: role, sub: "ann"))"}"#)
            let ended = try await ann.next(within: 10, "ann's channel ending") { $0.event == "system" && $0.payload["status"] == .string("error") }
            #expect(ended.payload["message"]?.stringValue?.contains("permissions to read") == true, "\(ended.payload.jsonText)")
            _ = try await ann.next(within: 10, "phx_close") { $0.event == "phx_close" }
            await alice.close()
            await ann.close()
            _ = try await daemon.stop()
        }

        /// Courses each user sees by the prefix of their short code: the user `SCH` sees Chemistry.
        static func createCoursesByPrefix(_ database: TestDatabase, role: String) throws {
            try database.execute("""
                CREATE ROLE \(role) NOLOGIN;
                GRANT SELECT ON course, enrols_in TO \(role);
                ALTER TABLE course ENABLE ROW LEVEL SECURITY;
                CREATE POLICY by_prefix ON course FOR SELECT TO \(role)
                  USING (short_code LIKE (current_setting('request.jwt.claims', true)::json->>'sub') || '%');
                """)
        }

        /// The EnrolmentsByCourse example (`LiveQueryModel` on `HeraldClient`),
        /// run as two users whose policies show each its own courses, on a
        /// live query that runs as its subscriber.
        @Test func theSwiftClientsLiveQueryModelShowsEachUserTheirRows() async throws {
            let database = try TestDatabase.create()
            let role = Self.makeRole()
            defer { _ = try? database.execute("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
            try Self.createCoursesByPrefix(database, role: role)
            let (science, english): (UInt32, UInt32) = (60041, 60042)
            let example = try String(contentsOf: TestDatabase.repositoryRoot.appending(path: "Examples/EnrolmentsByCourse/pgherald.yaml"), encoding: .utf8)
            let config = try Self.configuration { _ in
                """
                socket:
                  mode: "666"
                \(example.replacingOccurrences(of: "    key: [course_id]", with: "    key: [course_id]\n    as: subscriber"))
                access:
                \(Self.rule("science", user: science, role: role, sub: "SCH", granting: "queries: [enrolments_by_course]"))
                \(Self.rule("english", user: english, role: role, sub: "ENG", granting: "queries: [enrolments_by_course]"))
                """
            }
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            let binary = try SharedWithOtherUsers.path(of: DaemonProcess.executable.deletingLastPathComponent().appending(path: "EnrolmentsByCourse"))
            func screen(as user: UInt32) async throws -> String {
                let result = try await DaemonProcess(
                    ["--reuid=\(user)", "--regid=\(user)", "--clear-groups", "--", binary, "--socket", daemon.socketPath, "--count", "1"],
                    executable: URL(fileURLWithPath: "/usr/bin/setpriv")
                ).finish(within: 30)
                #expect(result.status == 0, "\(result.stderr)")
                return result.stdout
            }
            let chemistry = try await screen(as: science)
            let literature = try await screen(as: english)
            #expect(chemistry.contains("Chemistry") && !chemistry.contains("English") && !chemistry.contains("Functions"), "\(chemistry)")
            #expect(literature.contains("English") && !literature.contains("Chemistry"), "\(literature)")
            _ = try await daemon.stop()
        }

        /// Tables without row-level security follow the role's table and
        /// column privileges; `/stats` and `/metrics` count the cohorts and checks.
        @Test func tablesWithoutRowSecurityFollowThePrivileges() async throws {
            let database = try TestDatabase.create()
            let role = Self.makeRole()
            defer { _ = try? database.execute("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
            try Self.createTodos(database, role: role)
            try database.execute("""
                CREATE TABLE plain (id int PRIMARY KEY, title text, secret text);
                GRANT SELECT (id, title) ON plain TO \(role);
                CREATE TABLE hidden (id int PRIMARY KEY, title text);
                """)
            let (daemon, port) = try await Self.start(database, role: role)
            let token = Self.token(role: role, sub: "alice")
            let client = try await RealtimeTestClient(port: port, apikey: token)
            try await RealtimeTests.join(client, topic: "realtime:all", bindings: #"{"event":"*","schema":"public"}"#, token: token)
            try await daemon.waitForSubscribers(1, kind: "realtime")
            try database.execute("INSERT INTO hidden VALUES (1, 'h'); INSERT INTO plain VALUES (1, 'p', 'shh'); INSERT INTO todo VALUES (1, 'alice', 'milk', 'shh')")
            let changes = try await client.takeChanges(2, topic: "realtime:all")
            #expect(changes.map { $0["data"]?["table"]?.stringValue ?? "?" } == ["plain", "todo"])
            #expect(changes[0]["data"]?["record"] == .object(["id": .number(JSONNumber(1)), "title": .string("p")]), "\(changes[0].jsonText)")
            #expect(!changes.contains { $0.jsonText.contains("shh") })
            try await Task.sleep(for: .milliseconds(300))
            #expect(!client.unread.contains { $0.contains("postgres_changes") }, "\(client.unread)")

            let figures = try #require(try await daemon.statistics().rowSecurity)
            #expect(figures.cohorts == 1 && figures.checks >= 1 && figures.failures == 0, "\(figures)")
            let metrics = try await daemon.get("/metrics").body
            #expect(metrics.contains("pgherald_rls_cohorts 1") && metrics.contains("pgherald_rls_checks_total"), "\(metrics.prefix(400))")
            let status = try await DaemonProcess(["status", "--socket", daemon.socketPath]).finish()
            #expect(status.stdout.contains("row security: 1 cohorts,") && status.stdout.contains("0 failed, 0 judged alone"), "\(status.stdout)")
            await client.close()
            _ = try await daemon.stop()
        }
    }
}
