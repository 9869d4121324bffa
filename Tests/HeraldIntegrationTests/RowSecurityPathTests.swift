import Foundation
import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// The leak property over `/events`, by every way a stream gets its
    /// events: live, with and without a filter, resumed from the cohort's
    /// memory and from the journal. Each user has sessions that a policy
    /// tells apart (a revoked one), a policy calls a SECURITY DEFINER
    /// function that caches the caller's teams in a transaction-local
    /// setting, and writes move rows into and out of view, change their
    /// keys, and change team membership. The truth is read by the test, as
    /// each session, before and after every transaction.
    @Suite
    struct RowSecurityPathTests {
        static let users = ["ann", "ben", "cat"]
        /// Each user's two live sessions and one that connects at the end, from the journal.
        static func sessions(of user: String) -> [String] { ["\(user)-phone", "\(user)-laptop", "\(user)-late"] }

        /// A session's view: `table id` to `values`.
        static func visibleRows(as user: String, session: String, role: String, on connection: LibpqConnection) throws -> [String: String] {
            let claims = #"{"role":"\#(role)","sub":"\#(user)","session_id":"\#(session)"}"#
            let (results, error) = try connection.executeScript("""
                BEGIN READ ONLY;
                SET LOCAL ROLE \(role);
                SELECT set_config('request.jwt.claims', '\(claims)', true);
                SELECT 'note ' || id, concat_ws('/', owner, body) FROM note;
                SELECT 'task ' || id, concat_ws('/', team, title, archived) FROM task;
                ROLLBACK
                """)
            if let error { throw error }
            var rows: [String: String] = [:]
            for result in results[3...4] {
                for row in result.rows { rows[row[0] ?? ""] = row[1] ?? "" }
            }
            return rows
        }

        /// An event of an NDJSON stream as `TYPE table id values`, as a client's cache applies it.
        static func summary(_ event: Event) -> String {
            let removal = event.operation == .delete || event.leftView
            let row = (removal ? event.old : event.new) ?? [:]
            let id = row["id"].map(\.jsonText) ?? "?"
            let values: String
            if event.table.name == "note" {
                values = [row["owner"], row["body"]].compactMap { $0?.stringValue }.joined(separator: "/")
            } else {
                let archived = row["archived"] == .bool(true) ? "t" : "f"
                values = [row["team"].map(\.jsonText) ?? "", row["title"]?.stringValue ?? "", archived].joined(separator: "/")
            }
            return "\(removal ? "DELETE" : event.operation.rawValue) \(event.table.name) \(id) \(values)"
        }

        /// One write's keys: a row inserted, deleted, changed in place, or given a new key.
        enum Touch {
            case inserted(String), deleted(String), changed(String), moved(from: String, to: String)
        }

        /// What a session gets from one transaction, from what it saw before and after it.
        static func expected(_ touches: [Touch], before: [String: String], after: [String: String]) -> [String] {
            touches.compactMap { touch in
                switch touch {
                case .inserted(let key): after[key].map { "INSERT \(key) \($0)" }
                case .deleted(let key): before[key].map { "DELETE \(key) \($0)" }
                case .changed(let key): after[key].map { "UPDATE \(key) \($0)" } ?? before[key].map { "DELETE \(key) \($0)" }
                case .moved(let old, let new): after[new].map { "UPDATE \(new) \($0)" } ?? before[old].map { "DELETE \(old) \($0)" }
                }
            }
        }

        /// The filtered streams ask for notes whose body starts with `n`, judged on the row as the session sees it.
        static func passesFilter(_ summary: String) -> Bool {
            let parts = summary.split(separator: " ", maxSplits: 3)
            guard parts.count == 4, parts[1] == "note" else { return false }
            return parts[3].split(separator: "/", maxSplits: 1).last?.hasPrefix("n") == true
        }

        @Test(arguments: RowSecurityPropertyTests.cells)
        func everyPathGetsExactlyWhatEachSessionCouldSee(_ cell: TriggerCell) async throws {
            let database = try TestDatabase.create(install: false, on: cell.cluster)
            try Installer.install(on: database.connect(), durability: .durable, triggers: cell.triggers)
            let role = RowSecurityTests.makeRole()
            defer { _ = try? database.execute("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
            try database.execute("""
                CREATE ROLE \(role) NOLOGIN;
                CREATE TABLE team_member (team int, member text, PRIMARY KEY (team, member));
                CREATE TABLE revoked_session (session_id text PRIMARY KEY);
                GRANT SELECT ON revoked_session TO \(role);
                CREATE FUNCTION my_teams() RETURNS int[] LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
                DECLARE cached text := current_setting('app.my_teams', true);
                BEGIN
                  IF cached IS NULL OR cached = '' THEN
                    SELECT coalesce(string_agg(team::text, ','), '0') INTO cached FROM team_member
                      WHERE member = current_setting('request.jwt.claims', true)::json->>'sub';
                    PERFORM set_config('app.my_teams', cached, true);
                  END IF;
                  RETURN string_to_array(cached, ',')::int[];
                END $$;
                GRANT EXECUTE ON FUNCTION my_teams() TO \(role);
                CREATE TABLE note (id int PRIMARY KEY, owner text NOT NULL, body text, secret text);
                ALTER TABLE note ENABLE ROW LEVEL SECURITY;
                GRANT SELECT (id, owner, body) ON note TO \(role);
                CREATE POLICY own ON note FOR SELECT TO \(role) USING (owner = current_setting('request.jwt.claims', true)::json->>'sub');
                CREATE POLICY live_sessions ON note AS RESTRICTIVE FOR SELECT TO \(role) USING (NOT EXISTS (
                  SELECT FROM revoked_session r WHERE r.session_id = current_setting('request.jwt.claims', true)::json->>'session_id'));
                CREATE TABLE task (id int PRIMARY KEY, team int NOT NULL, title text, archived bool NOT NULL DEFAULT false);
                ALTER TABLE task ENABLE ROW LEVEL SECURITY;
                GRANT SELECT ON task TO \(role);
                CREATE POLICY of_my_team ON task FOR SELECT TO \(role) USING (team = ANY (my_teams()));
                CREATE POLICY not_archived ON task AS RESTRICTIVE FOR SELECT TO \(role) USING (NOT archived);
                """)
            let seed = UInt64.random(in: 0...UInt64(UInt32.max))
            var random = SeededRandom(seed: seed)
            let writer = try database.connect()
            for user in Self.users {
                for team in 1...3 where random.next(upTo: 2) == 0 {
                    try writer.execute("INSERT INTO team_member VALUES (\(team), '\(user)')")
                }
                // One live session of each user is revoked: its notes stop, its tasks go on.
                if random.next(upTo: 2) == 0 { try writer.execute("INSERT INTO revoked_session VALUES ('\(user)-laptop')") }
            }
            try writer.execute("CREATE TABLE marker (id int PRIMARY KEY)")
            let target = try await AttackTests.start(database, role: role)
            struct Live {
                var user: String
                var session: String
                var all: PeerStream
                var filtered: PeerStream
            }
            var live: [Live] = []
            for user in Self.users {
                for session in Self.sessions(of: user).prefix(2) {
                    let token = target.token(sub: user, session: session)
                    live.append(Live(
                        user: user, session: session,
                        all: try target.stream("/events?table=note,task&format=ndjson", token: token),
                        filtered: try target.stream("/events?table=note&where=body.like.n%25&format=ndjson", token: token)
                    ))
                }
            }
            try await target.daemon.waitForSubscribers(live.count * 2, kind: "ndjson")

            let reader = try database.connect()
            let everySession = Self.users.flatMap { user in Self.sessions(of: user).map { (user: user, session: $0) } }
            func views() throws -> [String: [String: String]] {
                try Dictionary(uniqueKeysWithValues: everySession.map {
                    ($0.session, try Self.visibleRows(as: $0.user, session: $0.session, role: role, on: reader))
                })
            }
            var expected: [String: [String]] = [:]
            var notes: Set<Int> = []
            var tasks: Set<Int> = []
            var nextID = 1
            // The late sessions resume from the journal after a marker half-way. A replay judges each change
            // against the other tables as they are when it is read (docs/supabase.md): membership changes only before it.
            let halfWay = 25
            var first = ""
            for step in 0..<50 {
                if step == halfWay {
                    try writer.execute("INSERT INTO marker VALUES (1)")
                    first = try #require(try writer.execute("SELECT max(id)::text FROM pgherald.journal").rows.first?[0] ?? nil)
                }
                let before = try views()
                var statements: [String] = []
                var touches: [Touch] = []
                var changesMembership = false
                func owner() -> String { Self.users[random.next(upTo: Self.users.count)] }
                func body() -> String { random.next(upTo: 2) == 0 ? "n\(step)" : "x\(step)" }
                let kind = random.next(upTo: 10)
                switch step >= halfWay && kind == 8 ? 9 : kind {
                case 0, 1:
                    let id = nextID
                    nextID += 1
                    statements.append("INSERT INTO note VALUES (\(id), '\(owner())', '\(body())', 'secret\(step)')")
                    touches.append(.inserted("note \(id)")); notes.insert(id)
                case 2 where !notes.isEmpty:
                    let id = notes.randomElement(using: &random)
                    statements.append("UPDATE note SET owner = '\(owner())', body = '\(body())' WHERE id = \(id)")
                    touches.append(.changed("note \(id)"))
                case 3 where !notes.isEmpty:
                    // A new key, and perhaps a new owner: who saw the old row sees it go under its old key.
                    let (id, moved) = (notes.randomElement(using: &random), nextID)
                    nextID += 1
                    statements.append("UPDATE note SET id = \(moved), owner = '\(owner())' WHERE id = \(id)")
                    touches.append(.moved(from: "note \(id)", to: "note \(moved)")); notes.remove(id); notes.insert(moved)
                case 4 where !notes.isEmpty:
                    let id = notes.randomElement(using: &random)
                    statements.append("DELETE FROM note WHERE id = \(id)")
                    touches.append(.deleted("note \(id)")); notes.remove(id)
                case 5, 6:
                    let id = nextID
                    nextID += 1
                    statements.append("INSERT INTO task VALUES (\(id), \(1 + random.next(upTo: 3)), 't\(step)', false)")
                    touches.append(.inserted("task \(id)")); tasks.insert(id)
                case 7 where !tasks.isEmpty:
                    let id = tasks.randomElement(using: &random)
                    statements.append(random.next(upTo: 2) == 0
                        ? "UPDATE task SET team = \(1 + random.next(upTo: 3)), title = 't\(step)' WHERE id = \(id)"
                        : "UPDATE task SET archived = NOT archived WHERE id = \(id)")
                    touches.append(.changed("task \(id)"))
                case 8:
                    // A membership change, and a task of that team in the same transaction.
                    let (team, member) = (1 + random.next(upTo: 3), owner())
                    let joined = try writer.execute("SELECT 1 FROM team_member WHERE team = \(team) AND member = '\(member)'").rows.isEmpty
                    statements.append(joined
                        ? "INSERT INTO team_member VALUES (\(team), '\(member)')"
                        : "DELETE FROM team_member WHERE team = \(team) AND member = '\(member)'")
                    let id = nextID
                    nextID += 1
                    statements.append("INSERT INTO task VALUES (\(id), \(team), 't\(step)', false)")
                    touches.append(.inserted("task \(id)")); tasks.insert(id)
                    changesMembership = true
                default:
                    // Two tables in one transaction: one batch, every cohort judged in it.
                    let (first, second) = (nextID, nextID + 1)
                    nextID += 2
                    statements.append("INSERT INTO note VALUES (\(first), '\(owner())', '\(body())', NULL)")
                    statements.append("INSERT INTO task VALUES (\(second), \(1 + random.next(upTo: 3)), 't\(step)', false)")
                    touches += [.inserted("note \(first)"), .inserted("task \(second)")]
                    notes.insert(first); tasks.insert(second)
                }
                guard !statements.isEmpty else { continue }
                // Policies read team_member when the daemon checks: a change to it waits for the checks of what came before.
                if changesMembership { try await Task.sleep(for: .milliseconds(400)) }
                try writer.execute("BEGIN; " + statements.joined(separator: "; ") + "; COMMIT")
                let after = try views()
                for (_, session) in everySession where step >= halfWay || !session.hasSuffix("-late") {
                    expected[session, default: []] += Self.expected(touches, before: before[session]!, after: after[session]!)
                }
            }

            var mismatches: [String] = []
            /// - Parameter after: events up to this id are left out: a resume from the journal starts at the
            ///   daemon's checkpoint before the event resumed after, and may repeat what came before it.
            func check(_ stream: PeerStream, _ name: String, wanted: [String], after: UInt64 = 0) async throws {
                _ = try? await stream.wait(within: 15) { text in
                    text.split(separator: "\n").filter { (try? Event(payload: String($0))).map { (UInt64($0.id) ?? 0) > after } ?? false }.count >= wanted.count
                }
                try await Task.sleep(for: .milliseconds(300))
                let lines = stream.text.split(separator: "\n")
                let received = try lines.filter { $0.contains("\"op\":") }.map { try Event(payload: String($0)) }
                    .filter { (UInt64($0.id) ?? 0) > after }
                // Heartbeats aside, any other frame (a reset, an ending) is a path that lost its place.
                let frames = lines.filter { !$0.contains("\"op\":") && !$0.contains("heartbeat") }
                if !frames.isEmpty { mismatches.append("\(name): frames other than events: \(frames)") }
                let got = received.map(Self.summary)
                if got != wanted { mismatches.append("\(name): expected \(wanted), got \(got)") }
                if stream.text.contains("secret") { mismatches.append("\(name): a secret column") }
            }
            for stream in live {
                let wanted = expected[stream.session, default: []]
                try await check(stream.all, "\(stream.session) live", wanted: wanted)
                try await check(stream.filtered, "\(stream.session) live, where=body.like.n%", wanted: wanted.filter(Self.passesFilter))
            }
            // Resumed from the cohort's memory: a phone that reconnects after its first event.
            for user in Self.users {
                let session = "\(user)-phone"
                let wanted = expected[session, default: []]
                let firstSeen = try live.first { $0.session == session }?.all.text.split(separator: "\n")
                    .first { $0.contains("\"op\":") }.map { try Event(payload: String($0)).id }
                guard let firstSeen, !wanted.isEmpty else { continue }
                let resumed = try target.stream("/events?table=note,task&format=ndjson&since=\(firstSeen)", token: target.token(sub: user, session: session))
                try await check(resumed, "\(session) resumed from memory after \(firstSeen)", wanted: Array(wanted.dropFirst()))
                // A session the daemon never saw: its cohort is new, so it reads the journal, filter and all.
                let late = "\(user)-late"
                let token = target.token(sub: user, session: late)
                let fromJournal = try target.stream("/events?table=note,task&format=ndjson&since=\(first)", token: token)
                let filteredFromJournal = try target.stream("/events?table=note&where=body.like.n%25&format=ndjson&since=\(first)", token: token)
                let lateWanted = expected[late, default: []]
                let marker = try #require(UInt64(first))
                try await check(fromJournal, "\(late) from the journal", wanted: lateWanted, after: marker)
                try await check(filteredFromJournal, "\(late) from the journal, where=body.like.n%", wanted: lateWanted.filter(Self.passesFilter), after: marker)
            }
            cell.report("RowSecurityPathTests", passed: mismatches.isEmpty ? 1 : 0, total: 1)
            #expect(mismatches.isEmpty, "seed \(seed): \(mismatches.joined(separator: "\n"))")
            // A hidden column is refused on every path, before anything is read.
            let token = target.token(sub: "ann", session: "ann-phone")
            for path in ["/events?table=note&where=secret.eq.x", "/events?table=note&where=secret.eq.x&since=\(first)"] {
                let refused = try await target.request(path, token: token)
                #expect(refused.status == 403 && refused.body.contains("permission denied"), "\(path): \(refused)")
            }
            _ = try await target.daemon.stop()
        }
    }
}
