import Foundation
import Herald
import Testing

extension IntegrationTests {
    /// What an attacker with one valid user token each tried against the
    /// row-level security release, one test per class of what it found,
    /// each asserting the opposite of what the attack got. Over the network listener
    /// with curl, as the attacker had it, against real policies.
    @Suite
    struct AttackTests {
        static let jwtSecret = "attack-jwt-secret-with-at-least-32-characters"

        /// A daemon over plain HTTP on loopback whose tokens of `role` go
        /// through row-level security, with the `topics:` grant the attacker had.
        struct Target {
            let daemon: SocketDaemon
            let port: Int
            let role: String
            let config: String

            func token(_ claims: String) -> String {
                makeToken(#"{"role":"\#(role)","exp":\#(Int(Date().timeIntervalSince1970) + 3600),\#(claims)}"#, secret: AttackTests.jwtSecret)
            }

            func token(sub: String, session: String? = nil) -> String {
                token(#""sub":"\#(sub)""# + (session.map { #","session_id":"\#($0)""# } ?? ""))
            }

            private func curl(_ arguments: [String], token: String?) throws -> DaemonProcess {
                let authorization = token.map { ["-H", "Authorization: Bearer \($0)"] } ?? []
                return try DaemonProcess(["-s", "--max-time", "30"] + authorization + arguments, executable: URL(fileURLWithPath: "/usr/bin/curl"))
            }

            func stream(_ path: String, token: String) throws -> PeerStream {
                try PeerStream(process: curl(["-N", "http://127.0.0.1:\(port)\(path)"], token: token))
            }

            /// The status and body of a request, bounded in time.
            func request(_ path: String, token: String?, method: String = "GET", body: String? = nil) async throws -> (status: Int, body: String) {
                let sending = body.map { ["-H", "Content-Type: application/json", "--data-binary", $0] } ?? []
                let result = try await curl(
                    ["-X", method, "-w", "\n%{http_code}"] + sending + ["http://127.0.0.1:\(port)\(path)"], token: token
                ).finish(within: 30)
                let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
                return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
            }

            /// Events of an NDJSON stream so far.
            static func events(_ text: String) throws -> [Event] {
                try text.split(separator: "\n").filter { $0.contains("\"op\":") }.map { try Event(payload: String($0)) }
            }
        }

        static let attackersGrant = "rls: true\n        topics: [room-*]"

        /// The configuration: `realtime.jwt` with one role, `role`, granted `grant`.
        static func writeConfiguration(_ config: String, port: Int, role: String, grant: String) throws {
            let secretFile = URL(fileURLWithPath: config).deletingLastPathComponent().appending(path: "attack-jwt").path
            try jwtSecret.write(toFile: secretFile, atomically: true, encoding: .utf8)
            try """
                http:
                  listen: 127.0.0.1:\(port)
                realtime:
                  jwt:
                    secret_file: \(secretFile)
                    roles:
                      \(role):
                        \(grant)
                """.write(toFile: config, atomically: true, encoding: .utf8)
        }

        static func start(_ database: TestDatabase, role: String, grant: String = attackersGrant) async throws -> Target {
            let port = freeLoopbackPort()
            let config = try RowSecurityTests.configuration { _ in "" }
            try writeConfiguration(config, port: port, role: role, grant: grant)
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            return Target(daemon: daemon, port: port, role: role, config: config)
        }

        /// `todo` as the attacker met it: rows by owner, a column no member may select.
        static func prepare(_ database: TestDatabase) throws -> String {
            let role = RowSecurityTests.makeRole()
            try RowSecurityTests.createTodos(database, role: role)
            return role
        }

        static func drop(_ role: String, in database: TestDatabase) {
            _ = try? database.execute("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)")
        }

        /// One request from a new cohort, after the daemon has published an
        /// event, ended every user's stream with an arithmetic overflow.
        @Test func aNewCohortsFirstStreamCannotStopTheDaemon() async throws {
            let database = try TestDatabase.create()
            let role = try Self.prepare(database)
            defer { Self.drop(role, in: database) }
            let target = try await Self.start(database, role: role)
            try database.execute("INSERT INTO todo VALUES (1, 'alice', 'milk', 's1')")
            try await waitFor(seconds: 10) { (try? await target.daemon.statistics().changeCount) == 1 } failure: { "the first event" }

            let bystander = try target.stream("/events?table=todo&format=ndjson", token: target.token(sub: "bob"))
            let attacker = try target.stream("/events?format=ndjson", token: target.token(sub: "mallory"))
            try await target.daemon.waitForSubscribers(2, kind: "ndjson")
            try database.execute("INSERT INTO todo VALUES (2, 'bob', 'bread', 's2')")
            let seen = try await bystander.wait { $0.contains("bread") }
            #expect(try Target.events(seen).map(\.id).count == 1)
            #expect(try await target.daemon.get("/healthz").status == 200)
            _ = attacker
            let stopped = try await target.daemon.stop()
            #expect(!stopped.stderr.contains("Fatal error") && !stopped.stderr.contains("overflow"), "\(stopped.stderr.suffix(2000))")
        }

        /// A `where=` on a replay was evaluated on the row as written: a
        /// binary search on it read a hidden column and the new values of a
        /// row that had left the user's view.
        @Test func aFilterReadsOnlyWhatTheUserMaySeeOnEveryPath() async throws {
            let database = try TestDatabase.create()
            let role = try Self.prepare(database)
            defer { Self.drop(role, in: database) }
            let target = try await Self.start(database, role: role)
            let alice = target.token(sub: "alice")
            try database.execute("INSERT INTO todo VALUES (1, 'alice', 'milk', 'hunter2-Zq9')")
            try database.execute("UPDATE todo SET owner = 'bob', title = 'moved-away' WHERE id = 1")
            try await waitFor(seconds: 10) { (try? await target.daemon.statistics().changeCount) == 2 } failure: { "both events" }
            let first = try Self.firstEventID(database)

            // A hidden column is refused in PostgreSQL's own words, live and on a resume, before anything is read.
            for path in ["/events?table=todo&where=secret.gte.h", "/events?table=todo&where=secret.gte.h&since=\(first)", "/events?where=secret.is.null"] {
                let refused = try await target.request(path, token: alice)
                #expect(refused.status == 403 && refused.body.contains(#"permission denied for column \"secret\" of relation \"todo\""#), "\(path): \(refused)")
            }
            // A row that left the view is judged, on a resume from the journal, as the user saw it: its new title is not there to match.
            let probe = try target.stream("/events?table=todo&format=ndjson&where=title.eq.moved-away&since=\(first)", token: alice)
            let matching = try target.stream("/events?table=todo&format=ndjson&where=title.eq.milk&since=\(first)", token: alice)
            let seen = try await matching.wait { $0.contains("left_view") }
            let events = try Target.events(seen)
            #expect(events.map { "\($0.operation) \($0.leftView)" } == ["UPDATE true"], "\(seen)")
            #expect(!seen.contains("moved-away") && !seen.contains("hunter2"), "\(seen)")
            try await Task.sleep(for: .milliseconds(500))
            #expect(try Target.events(probe.text).isEmpty, "\(probe.text)")
            _ = try await target.daemon.stop()
        }

        /// A live removal carried the new row's key beside the old row.
        @Test func aRemovalCarriesTheKeyTheUserSaw() async throws {
            let database = try TestDatabase.create()
            let role = try Self.prepare(database)
            defer { Self.drop(role, in: database) }
            let target = try await Self.start(database, role: role)
            let stream = try target.stream("/events?table=todo&format=ndjson", token: target.token(sub: "alice"))
            try await target.daemon.waitForSubscribers(1, kind: "ndjson")
            try database.execute("INSERT INTO todo VALUES (1, 'alice', 'milk', 's1')")
            try database.execute("UPDATE todo SET id = 4242, owner = 'bob' WHERE id = 1")
            let seen = try await stream.wait { $0.contains("left_view") }
            let removal = try #require(try Target.events(seen).last)
            #expect(removal.leftView && removal.primaryKey == ["id": .number(JSONNumber(Int64(1)))], "\(seen)")
            #expect(!seen.contains("4242"), "\(seen)")
            _ = try await target.daemon.stop()
        }

        /// Two sessions of one user that a policy tells apart: a revoked
        /// session receives nothing more, the other goes on.
        @Test func sessionsThatAPolicyTellsApartAreJudgedApart() async throws {
            let database = try TestDatabase.create()
            let role = try Self.prepare(database)
            defer { Self.drop(role, in: database) }
            try database.execute("""
                CREATE TABLE revoked_session (session_id text PRIMARY KEY);
                GRANT SELECT ON revoked_session TO \(role);
                CREATE POLICY live_sessions ON todo AS RESTRICTIVE FOR SELECT TO \(role) USING (NOT EXISTS (
                  SELECT FROM revoked_session WHERE session_id = current_setting('request.jwt.claims', true)::json->>'session_id'));
                INSERT INTO revoked_session VALUES ('laptop');
                """)
            let target = try await Self.start(database, role: role)
            let phone = try target.stream("/events?table=todo&format=ndjson", token: target.token(sub: "alice", session: "phone"))
            let laptop = try target.stream("/events?table=todo&format=ndjson", token: target.token(sub: "alice", session: "laptop"))
            try await target.daemon.waitForSubscribers(2, kind: "ndjson")
            try database.execute("INSERT INTO todo VALUES (1, 'alice', 'milk', 's1')")
            try await phone.wait { $0.contains("milk") }
            try await Task.sleep(for: .milliseconds(500))
            #expect(!laptop.text.contains("milk"), "the revoked session received: \(laptop.text)")
            _ = try await target.daemon.stop()
        }

        /// Users whose `sub` only looked alike (`zoë` as one character, and as
        /// `e` with a combining diaeresis: two users to PostgreSQL, whose `=`
        /// compares bytes) were one cohort, judged with the claims of whichever
        /// came first: the second got the first's rows and never its own (found
        /// by an outside tester). Identities, table names, topics, a row's
        /// columns and `where=` comparisons now go byte for byte.
        @Test func usersWhoseNamesOnlyLookAlikeAreJudgedApart() async throws {
            let database = try TestDatabase.create()
            let role = try Self.prepare(database)
            defer { Self.drop(role, in: database) }
            let target = try await Self.start(database, role: role)
            let (composed, decomposed) = ("zo\u{00EB}", "zoe\u{0308}")
            #expect(composed == decomposed && !composed.utf8.elementsEqual(decomposed.utf8), "Swift takes them for one, PostgreSQL for two")
            // The decomposed one first: its cohort used to take in the composed one.
            let first = try target.stream("/events?table=todo&format=ndjson", token: target.token(sub: decomposed))
            try await target.daemon.waitForSubscribers(1, kind: "ndjson")
            let second = try target.stream("/events?table=todo&format=ndjson", token: target.token(sub: composed))
            let filtered = try target.stream("/events?table=todo&format=ndjson&where=owner.eq.\(composed.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)", token: target.token(sub: composed))
            try await target.daemon.waitForSubscribers(3, kind: "ndjson")
            try database.execute("INSERT INTO todo VALUES (1, $1, 'decomposed-row', 's1')", parameters: [decomposed])
            try database.execute("INSERT INTO todo VALUES (2, $1, 'composed-row', 's2')", parameters: [composed])
            try await first.wait { $0.contains("decomposed-row") }
            try await second.wait { $0.contains("composed-row") }
            try await filtered.wait { $0.contains("composed-row") }
            try await Task.sleep(for: .milliseconds(500))
            #expect(!first.text.contains("\"composed-row"), "\(first.text)")
            #expect(!second.text.contains("decomposed-row"), "\(second.text)")
            #expect(!filtered.text.contains("decomposed-row"), "\(filtered.text)")
            _ = try await target.daemon.stop()
        }

        /// Two tables whose names only look alike (`probe_ö` with one character
        /// and with `o` and a combining diaeresis) were one key of `/stats`'
        /// per-table counts, and building them trapped: the daemon stopped (found
        /// by an outside tester). Their counts now add up under the one name
        /// `/stats` can show, and `/metrics` keeps them apart.
        @Test func tablesWhoseNamesOnlyLookAlikeCannotStopTheDaemon() async throws {
            let database = try TestDatabase.create()
            try database.execute(#"CREATE TABLE U&"probe_\00f6" (id int PRIMARY KEY); CREATE TABLE U&"probe_o\0308" (id int PRIMARY KEY)"#)
            let daemon = try await SocketDaemon(database: database)
            try database.execute(#"INSERT INTO U&"probe_\00f6" VALUES (1); INSERT INTO U&"probe_o\0308" VALUES (1), (2)"#)
            try await waitFor(seconds: 10) { (try? await daemon.statistics().changeCount) == 3 } failure: { "the three events" }
            let stats = try await daemon.get("/stats")
            #expect(stats.status == 200 && stats.body.contains(#""public.probe_\#u{00F6}":3"#), "\(stats)")
            let metrics = try await daemon.get("/metrics")
            #expect(metrics.status == 200, "\(metrics.status)")
            #expect(try await daemon.statistics().changeCount == 3, "the daemon still answers")
            _ = try await daemon.stop()
        }

        /// A policy function that keeps the caller's teams in a
        /// transaction-local setting, correct under PostgREST, gave user B
        /// user A's rows when both were judged in one transaction.
        @Test func eachCohortIsJudgedAloneAsAPostgRESTRequestIs() async throws {
            let database = try TestDatabase.create()
            let role = RowSecurityTests.makeRole()
            defer { Self.drop(role, in: database) }
            try database.execute("""
                CREATE ROLE \(role) NOLOGIN;
                CREATE TABLE membership (member text, team text);
                INSERT INTO membership VALUES ('alice', 'red'), ('bob', 'blue');
                CREATE FUNCTION my_teams() RETURNS text[] LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
                DECLARE cached text := current_setting('app.my_teams', true);
                BEGIN
                  IF cached IS NULL OR cached = '' THEN
                    SELECT coalesce(string_agg(team, ','), '-') INTO cached FROM membership
                      WHERE member = current_setting('request.jwt.claims', true)::json->>'sub';
                    PERFORM set_config('app.my_teams', cached, true);
                  END IF;
                  RETURN string_to_array(cached, ',');
                END $$;
                GRANT EXECUTE ON FUNCTION my_teams() TO \(role);
                CREATE TABLE task (id int PRIMARY KEY, team text NOT NULL, title text);
                ALTER TABLE task ENABLE ROW LEVEL SECURITY;
                GRANT SELECT ON task TO \(role);
                CREATE POLICY by_team ON task FOR SELECT TO \(role) USING (team = ANY (my_teams()));
                """)
            let target = try await Self.start(database, role: role)
            let alice = try target.stream("/events?table=task&format=ndjson", token: target.token(sub: "alice"))
            let bob = try target.stream("/events?table=task&format=ndjson", token: target.token(sub: "bob"))
            try await target.daemon.waitForSubscribers(2, kind: "ndjson")
            try database.execute("INSERT INTO task VALUES (1, 'red', 'r1'), (2, 'blue', 'b1'), (3, 'red', 'r2'), (4, 'blue', 'b2')")
            let aliceSaw = try await alice.wait { $0.contains("r2") }
            let bobSaw = try await bob.wait { $0.contains("b2") }
            try await Task.sleep(for: .milliseconds(300))
            #expect(try Target.events(alice.text).compactMap { $0.new?["title"]?.stringValue } == ["r1", "r2"], "\(aliceSaw)")
            #expect(try Target.events(bob.text).compactMap { $0.new?["title"]?.stringValue } == ["b1", "b2"], "\(bobSaw)")
            _ = try await target.daemon.stop()
        }

        /// `topics: [room-*]` on a row-level-security role let a user
        /// broadcast into, and read, another user's private room; the
        /// policies on `realtime.messages` decide now, both ways.
        @Test func privateRoomsFollowThePoliciesWhateverTheTopicsGrant() async throws {
            let database = try TestDatabase.create()
            let role = try Self.prepare(database)
            defer { Self.drop(role, in: database) }
            try RowSecurityTests.createRealtimeMessages(database, role: role)
            try database.execute("""
                CREATE POLICY own_room_read ON realtime.messages FOR SELECT TO \(role) USING (
                  realtime.topic() = 'room-' || (current_setting('request.jwt.claims', true)::json->>'sub'));
                CREATE POLICY own_room_write ON realtime.messages FOR INSERT TO \(role) WITH CHECK (
                  realtime.topic() = 'room-' || (current_setting('request.jwt.claims', true)::json->>'sub'));
                """)
            let target = try await Self.start(database, role: role)
            let (alice, bob) = (target.token(sub: "alice"), target.token(sub: "bob"))
            func broadcast(_ topic: String, as token: String) async throws -> (status: Int, body: String) {
                try await target.request(
                    "/realtime/v1/api/broadcast", token: token, method: "POST",
                    body: #"{"messages":[{"topic":"\#(topic)","event":"note","payload":{"text":"to \#(topic)"},"private":true}]}"#
                )
            }
            let intoBobs = try await broadcast("room-bob", as: alice)
            #expect(intoBobs.status == 403 && intoBobs.body.contains("permissions to write"), "\(intoBobs)")
            let intoOwn = try await broadcast("room-alice", as: alice)
            #expect(intoOwn.status == 202, "\(intoOwn)")

            // Reading another's room through /events?topic= gets none of its private messages; one's own, all.
            let prying = try target.stream("/events?topic=room-bob&format=ndjson", token: alice)
            let own = try target.stream("/events?topic=room-bob&format=ndjson", token: bob)
            try await target.daemon.waitForSubscribers(2, kind: "ndjson")
            try database.execute(#"SELECT pgherald.send('{"text": "for bob only"}', 'note', 'room-bob', true)"#)
            try await own.wait { $0.contains("for bob only") }
            try await Task.sleep(for: .milliseconds(500))
            #expect(!prying.text.contains("for bob only"), "\(prying.text)")
            _ = try await target.daemon.stop()
        }

        /// A resume after the user's last stream had closed got nothing of what
        /// happened meanwhile: the cohort's memory held only what its streams followed.
        @Test func aResumeGetsWhatHappenedWhileTheUserHadNoStream() async throws {
            let database = try TestDatabase.create()
            let role = try Self.prepare(database)
            defer { Self.drop(role, in: database) }
            let target = try await Self.start(database, role: role)
            let token = target.token(sub: "alice")
            let first = try target.stream("/events?table=todo&format=ndjson", token: token)
            try await target.daemon.waitForSubscribers(1, kind: "ndjson")
            try database.execute("INSERT INTO todo VALUES (1, 'alice', 'seen', 's1')")
            let seen = try #require(try Target.events(try await first.wait { $0.contains("seen") }).first)
            first.process.signal(SIGTERM)
            _ = try? await first.process.finish(within: 10)
            try await waitFor { (try await target.daemon.statistics().subscribers["ndjson"] ?? 0) == 0 } failure: { "the stream did not close" }
            // While alice has no stream, her cohort lives on (it is kept a while for her return) but follows nothing.
            try database.execute("INSERT INTO todo VALUES (2, 'alice', 'missed', 's2'), (3, 'bob', 'not hers', 's3')")
            try await waitFor { (try? await target.daemon.statistics().changeCount) == 3 } failure: { "the writes" }
            try await Task.sleep(for: .milliseconds(300))
            for path in ["/events?table=todo&format=ndjson&since=\(seen.id)", "/events?format=ndjson&since=\(seen.id)"] {
                let resumed = try target.stream(path, token: token)
                let text = try await resumed.wait(within: 15) { $0.contains("missed") }
                #expect(try Target.events(text).map { $0.new?["title"]?.stringValue } == ["missed"], "\(path): \(text)")
                #expect(!text.contains("not hers") && !text.contains("secret"))
            }
            _ = try await target.daemon.stop()
        }

        /// A signed token whose `exp` is a date in a string was accepted.
        @Test func aTokenWhoseDatesAreNotNumbersIsRefused() async throws {
            let database = try TestDatabase.create()
            let role = try Self.prepare(database)
            defer { Self.drop(role, in: database) }
            let target = try await Self.start(database, role: role)
            for claims in [#""exp":"2001-01-01","sub":"alice""#, #""exp":"1","sub":"alice""#, #""nbf":{},"sub":"alice""#] {
                let token = makeToken(#"{"role":"\#(role)",\#(claims)}"#, secret: Self.jwtSecret)
                let refused = try await target.request("/events?table=todo", token: token)
                #expect(refused.status == 401 && refused.body.contains("malformed_token"), "\(claims): \(refused)")
            }
            _ = try await target.daemon.stop()
        }

        /// A reload that takes a JWT role away left the streams it admitted
        /// open: a leaked token could not be cut off without a restart.
        @Test func aReloadThatTakesACredentialAwayEndsItsStreamsAtOnce() async throws {
            let database = try TestDatabase.create()
            let role = try Self.prepare(database)
            defer { Self.drop(role, in: database) }
            let target = try await Self.start(database, role: role)
            let leaked = try target.stream("/events?table=todo&format=sse", token: target.token(sub: "alice"))
            try await target.daemon.waitForSubscribers(1, kind: "sse")
            try Self.writeConfiguration(target.config, port: target.port, role: "someone_else", grant: Self.attackersGrant)
            let reloaded = ContinuousClock.now
            target.daemon.process.signal(SIGHUP)
            let ended = try await leaked.wait(within: 5) { $0.contains("event: revoked") }
            #expect(ContinuousClock.now - reloaded < .seconds(2), "ended \(ContinuousClock.now - reloaded) after the reload")
            #expect(ended.contains("revoked its key or token"), "\(ended)")
            try await waitFor(seconds: 5) { leaked.hasEnded } failure: { "the stream stayed open" }
            try database.execute("INSERT INTO todo VALUES (1, 'alice', 'milk', 's1')")
            try await Task.sleep(for: .milliseconds(300))
            #expect(!leaked.text.contains("milk"))
            let refused = try await target.request("/events?table=todo", token: target.token(sub: "alice"))
            #expect(refused.status == 401, "\(refused)")
            _ = try await target.daemon.stop()
        }

        /// A reload that took a key away ended its channels but left its
        /// socket open, and an outside tester's socket then joined again and
        /// received rows; a socket whose grant a reload narrowed joined again
        /// under its old grant. Now a revoked key's socket closes with 1008,
        /// and every join is judged by the credentials as they are now.
        @Test func aReloadThatRevokesAKeyClosesItsSocketsAndNarrowsLaterJoins() async throws {
            typealias Realtime = IntegrationTests.RealtimeTests
            let database = try TestDatabase.create()
            let (daemon, port, config) = try await Realtime.start(database)
            let courses = #"{"event":"*","schema":"public","table":"course"}"#
            let leaked = try await RealtimeTestClient(port: port, apikey: Realtime.coursesKey)
            try await Realtime.join(leaked, topic: "realtime:one", bindings: courses)
            let narrowed = try await RealtimeTestClient(port: port, apikey: Realtime.allKey)
            try await Realtime.join(narrowed, topic: "realtime:before", bindings: courses)

            // The courses key goes; the all key keeps only student.
            let text = try String(contentsOfFile: config, encoding: .utf8)
                .replacingOccurrences(of: "    all:\n      key: \(Realtime.allKey)\n", with: "    all:\n      key: \(Realtime.allKey)\n      tables: [public.student]\n")
                .replacingOccurrences(of: "    courses:\n      key: \(Realtime.coursesKey)\n      tables: [public.course]\n", with: "")
            #expect(!text.contains(Realtime.coursesKey) && text.contains("tables: [public.student]"), "\(text)")
            try text.write(toFile: config, atomically: true, encoding: .utf8)
            let reloaded = ContinuousClock.now
            daemon.process.signal(SIGHUP)
            try await waitFor(seconds: 5) { leaked.endedBecause != nil } failure: { "the revoked key's socket stayed open" }
            #expect(ContinuousClock.now - reloaded < .seconds(2), "closed \(ContinuousClock.now - reloaded) after the reload")

            // The narrowed socket's channel ended, and takes no more sends (an outside tester's still broadcast).
            _ = try await narrowed.next(within: 5, "the narrowed channel's end") { $0.topic == "realtime:before" && $0.event == "phx_close" }
            try await narrowed.send(joinRef: "1", ref: "9", topic: "realtime:before", event: "broadcast", payload: #"{"type":"broadcast","event":"e","payload":{}}"#)
            let unmatched = try await narrowed.next(within: 5, "the ended channel's broadcast refused") { $0.ref == .string("9") }
            #expect(unmatched.payload["response"]?["reason"] == .string("unmatched topic"), "\(unmatched.payload.jsonText)")
            // Joined again on course, it is refused and gets no row.
            try await narrowed.send(joinRef: "2", ref: "2", topic: "realtime:after", event: "phx_join", payload: Realtime.joinPayload(courses))
            let answer = try await narrowed.next(within: 10, "the later join's answer") {
                $0.topic == "realtime:after" && ($0.event == "system" || ($0.event == "phx_reply" && $0.payload["status"] == .string("error")))
            }
            #expect(answer.payload["status"] != .string("ok"), "a join under the old grant: \(answer.payload.jsonText)")
            try database.execute("INSERT INTO course (short_code, name) VALUES ('RVK1', 'after the reload')")
            try await Task.sleep(for: .milliseconds(500))
            #expect(!narrowed.unread.contains { $0.contains("RVK1") }, "the narrowed socket received a course row")
            await narrowed.close()
            _ = try await daemon.stop()
        }

        /// A channel whose token expired was ended only at its next database
        /// event, and one of broadcasts and presence alone never: five seconds
        /// after expiry an outside tester's channel still broadcast and tracked
        /// presence. Now a channel ends when its token does, and its topic
        /// takes no more sends.
        @Test func aChannelEndsWhenItsTokenExpiresWithoutAnEvent() async throws {
            typealias Realtime = IntegrationTests.RealtimeTests
            let database = try TestDatabase.create()
            let (daemon, port, _) = try await Realtime.start(database)
            let expiring = makeToken(#"{"role":"anon","exp":\#(Int(Date().timeIntervalSince1970) + 3)}"#, secret: Realtime.jwtSecret)
            let client = try await RealtimeTestClient(port: port, apikey: expiring)
            let member = try await RealtimeTestClient(port: port, apikey: Realtime.allKey)
            for (socket, ref) in [(client, "1"), (member, "2")] {
                try await socket.send(joinRef: ref, ref: ref, topic: "realtime:room", event: "phx_join", payload: Realtime.joinPayload(""))
                #expect(try await socket.next(within: 10, "join \(ref)") { $0.ref == .string(ref) }.payload["status"] == .string("ok"))
            }
            let system = try await client.next(within: 8, "the expiry's system message") {
                $0.topic == "realtime:room" && $0.event == "system" && $0.payload["status"] == .string("error")
            }
            #expect(system.payload["message"] == .string("Token has expired"), "\(system.payload.jsonText)")
            try await client.next(within: 5, "phx_close") { $0.topic == "realtime:room" && $0.event == "phx_close" }
            try await client.send(joinRef: "1", ref: "3", topic: "realtime:room", event: "broadcast", payload: #"{"type":"broadcast","event":"late","payload":{}}"#)
            let refused = try await client.next(within: 5, "the late broadcast's reply") { $0.ref == .string("3") }
            #expect(refused.payload["status"] == .string("error"), "\(refused.payload.jsonText)")
            try await Task.sleep(for: .milliseconds(300))
            #expect(!member.unread.contains { $0.contains("late") }, "a broadcast after expiry reached another member")
            await client.close()
            await member.close()
            _ = try await daemon.stop()
        }

        /// Each event of a partitioned table carried its partition's name: a
        /// subscription to the partitioned table got nothing, its policies
        /// were never applied, and one to a partition without row-level
        /// security got everyone's rows. Partitions now publish under their
        /// partitioned table, as Supabase publishes them, attached, default
        /// and sub-partitions alike.
        @Test func partitionsPublishUnderTheirPartitionedTableAndItsPoliciesJudgeThem() async throws {
            let database = try TestDatabase.create()
            let role = RowSecurityTests.makeRole()
            defer { Self.drop(role, in: database) }
            try database.execute("""
                CREATE ROLE \(role) NOLOGIN;
                CREATE TABLE ptodo (id int, owner text, title text, secret text, PRIMARY KEY (id, owner)) PARTITION BY LIST (owner);
                CREATE TABLE ptodo_alice PARTITION OF ptodo FOR VALUES IN ('alice');
                CREATE TABLE ptodo_bob PARTITION OF ptodo FOR VALUES IN ('bob') PARTITION BY RANGE (id);
                CREATE TABLE ptodo_bob_low PARTITION OF ptodo_bob FOR VALUES FROM (0) TO (100);
                CREATE TABLE ptodo_bob_high PARTITION OF ptodo_bob FOR VALUES FROM (100) TO (MAXVALUE);
                CREATE TABLE ptodo_rest PARTITION OF ptodo DEFAULT;
                ALTER TABLE ptodo ENABLE ROW LEVEL SECURITY;
                GRANT SELECT (id, owner, title) ON ptodo TO \(role);
                GRANT SELECT ON ptodo_alice, ptodo_bob_low, ptodo_bob_high, ptodo_rest TO \(role);
                CREATE POLICY own ON ptodo FOR SELECT TO \(role) USING (owner = current_setting('request.jwt.claims', true)::json->>'sub');
                """)
            let target = try await Self.start(database, role: role)
            let alice = try target.stream("/events?table=ptodo&format=ndjson", token: target.token(sub: "alice"))
            let bob = try target.stream("/events?table=ptodo&format=ndjson", token: target.token(sub: "bob"))
            let pryingOnALeaf = try target.stream("/events?table=ptodo_bob_low&format=ndjson", token: target.token(sub: "alice"))
            try await target.daemon.waitForSubscribers(3, kind: "ndjson")
            try database.execute("""
                INSERT INTO ptodo VALUES (1, 'alice', 'a1', 's'), (2, 'bob', 'b-low', 's'), (200, 'bob', 'b-high', 's'), (3, 'carol', 'c1', 's');
                CREATE TABLE ptodo_dan (LIKE ptodo);
                ALTER TABLE ptodo ATTACH PARTITION ptodo_dan FOR VALUES IN ('dan');
                INSERT INTO ptodo VALUES (4, 'dan', 'd1', 's'), (5, 'alice', 'a2', 's');
                """)
            let aliceSaw = try await alice.wait { $0.contains("a2") }
            let bobSaw = try await bob.wait { $0.contains("b-high") }
            try await Task.sleep(for: .milliseconds(500))
            let aliceEvents = try Target.events(alice.text)
            #expect(aliceEvents.compactMap { $0.new?["title"]?.stringValue } == ["a1", "a2"], "\(aliceSaw)")
            #expect(aliceEvents.allSatisfy { $0.table.name == "ptodo" && $0.partition?.name == "ptodo_alice" }, "\(aliceSaw)")
            let bobEvents = try Target.events(bob.text)
            #expect(bobEvents.compactMap { $0.new?["title"]?.stringValue } == ["b-low", "b-high"], "\(bobSaw)")
            #expect(bobEvents.map { $0.partition?.name } == ["ptodo_bob_low", "ptodo_bob_high"], "\(bobSaw)")
            #expect(!alice.text.contains("secret") && !bob.text.contains("secret"))
            #expect(try Target.events(pryingOnALeaf.text).isEmpty, "\(pryingOnALeaf.text)")

            // A detached partition is a table of its own again, with its own name and none of the partitioned table's policies.
            let own = try target.stream("/events?table=ptodo_alice&format=ndjson", token: target.token(sub: "alice"))
            try await target.daemon.waitForSubscribers(4, kind: "ndjson")
            try database.execute("ALTER TABLE ptodo DETACH PARTITION ptodo_alice; INSERT INTO ptodo_alice VALUES (6, 'alice', 'a3', 's')")
            let detached = try await own.wait { $0.contains("a3") }
            #expect(try Target.events(detached).last.map { $0.table.name == "ptodo_alice" && $0.partition == nil } == true, "\(detached)")
            #expect(!alice.text.contains("a3"))
            _ = try await target.daemon.stop()
        }

        static func firstEventID(_ database: TestDatabase) throws -> UInt64 {
            let text = try database.execute("SELECT min(id)::text FROM pgherald.journal").rows.first?[0] ?? nil
            return try #require(text.flatMap { UInt64($0) })
        }
    }
}
