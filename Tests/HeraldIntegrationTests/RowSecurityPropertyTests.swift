import Foundation
import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// The leak property: under row-level security every subscriber gets
    /// exactly the changes its user could see, and nothing else. Random
    /// users on 1–3 Supabase clients each; tables with an owner policy, a
    /// membership subquery and a restrictive policy; random writes that move
    /// rows into and out of users' views. The truth is read independently,
    /// by selecting as each user before and after every transaction.
    @Suite
    struct RowSecurityPropertyTests {
        static let cells = TriggerCell.all.filter { $0.durability == .durable }
        static let users = ["ann", "ben", "cat", "dan", "eve"]

        /// A row as a user sees it, or as an event shows it: table, id and the columns the user may select.
        struct SeenRow: Hashable, CustomStringConvertible {
            var table: String
            var id: Int
            var values: String
            var description: String { "\(table) \(id) \(values)" }
        }

        /// What each user may select now, keyed `table id`.
        static func visibleRows(as user: String, role: String, on connection: LibpqConnection) throws -> [String: SeenRow] {
            let claims = #"{"role":"\#(role)","sub":"\#(user)"}"#
            let (results, error) = try connection.executeScript("""
                BEGIN READ ONLY;
                SET LOCAL ROLE \(role);
                SELECT set_config('request.jwt.claims', '\(claims)', true);
                SELECT id, concat_ws('/', owner, body) AS v FROM note;
                SELECT id, concat_ws('/', team, title, archived) AS v FROM task;
                ROLLBACK
                """)
            if let error { throw error }
            var rows: [String: SeenRow] = [:]
            for (table, result) in [("note", results[3]), ("task", results[4])] {
                for row in result.rows {
                    let id = Int(row[0] ?? "") ?? -1
                    rows["\(table) \(id)"] = SeenRow(table: table, id: id, values: row[1] ?? "")
                }
            }
            return rows
        }

        /// A received change as `TYPE table id values`, values from the record (the old record for a DELETE).
        static func summary(_ change: JSONValue) -> String {
            guard let data = change["data"], let type = data["type"]?.stringValue, let table = data["table"]?.stringValue else { return "?" }
            let row = type == "DELETE" ? data["old_record"] : data["record"]
            let id = row?["id"].map(\.jsonText) ?? "?"
            let values: String
            if table == "note" {
                values = [row?["owner"], row?["body"]].compactMap { $0?.stringValue }.joined(separator: "/")
            } else {
                let team = row?["team"].map(\.jsonText) ?? ""
                let archived = row?["archived"] == .bool(true) ? "t" : "f"
                values = [team, row?["title"]?.stringValue ?? "", archived].joined(separator: "/")
            }
            return "\(type) \(table) \(id) \(values)"
        }

        /// What a user gets from one transaction, from what it saw before and after it.
        static func expected(touched: [String], before: [String: SeenRow], after: [String: SeenRow], inserted: Set<String>, deleted: Set<String>) -> [String] {
            touched.compactMap { key in
                let parts = key.split(separator: " ")
                if inserted.contains(key) { return after[key].map { "INSERT \(parts[0]) \(parts[1]) \($0.values)" } }
                if deleted.contains(key) { return before[key].map { "DELETE \(parts[0]) \(parts[1]) \($0.values)" } }
                switch (before[key], after[key]) {
                case (_, let now?): return "UPDATE \(parts[0]) \(parts[1]) \(now.values)"
                case (let was?, nil): return "DELETE \(parts[0]) \(parts[1]) \(was.values)"
                case (nil, nil): return nil
                }
            }
        }

        @Test(arguments: cells)
        func everySubscriberGetsExactlyWhatItsUserCouldSee(_ cell: TriggerCell) async throws {
            let database = try TestDatabase.create(install: false, on: cell.cluster)
            try Installer.install(on: database.connect(), durability: .durable, triggers: cell.triggers)
            let role = RowSecurityTests.makeRole()
            defer { _ = try? database.execute("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
            try database.execute("""
                CREATE ROLE \(role) NOLOGIN;
                CREATE TABLE team_member (team int, member text, PRIMARY KEY (team, member));
                GRANT SELECT ON team_member TO \(role);
                CREATE TABLE note (id int PRIMARY KEY, owner text NOT NULL, body text, secret text);
                ALTER TABLE note ENABLE ROW LEVEL SECURITY;
                GRANT SELECT (id, owner, body) ON note TO \(role);
                CREATE POLICY own ON note FOR SELECT TO \(role)
                  USING (owner = current_setting('request.jwt.claims', true)::json->>'sub');
                CREATE TABLE task (id int PRIMARY KEY, team int NOT NULL, title text, archived bool NOT NULL DEFAULT false);
                ALTER TABLE task ENABLE ROW LEVEL SECURITY;
                GRANT SELECT ON task TO \(role);
                CREATE POLICY of_my_team ON task FOR SELECT TO \(role) USING (EXISTS (
                  SELECT FROM team_member m WHERE m.team = task.team AND m.member = current_setting('request.jwt.claims', true)::json->>'sub'));
                CREATE POLICY not_archived ON task AS RESTRICTIVE FOR SELECT TO \(role) USING (NOT archived);
                """)
            let seed = UInt64.random(in: 0...UInt64(UInt32.max))
            var random = SeededRandom(seed: seed)
            let writer = try database.connect()
            for user in Self.users {
                for team in 1...3 where random.next(upTo: 2) == 0 {
                    try writer.execute("INSERT INTO team_member VALUES (\(team), '\(user)')")
                }
            }
            let (daemon, port) = try await RowSecurityTests.start(database, role: role)
            var clients: [(user: String, topic: String, client: RealtimeTestClient)] = []
            for user in Self.users {
                for device in 0...random.next(upTo: 3) {
                    let token = RowSecurityTests.token(role: role, sub: user)
                    let client = try await RealtimeTestClient(port: port, apikey: token)
                    let topic = "realtime:\(user)-\(device)"
                    try await RealtimeTests.join(client, topic: topic, bindings: """
                        {"event":"*","schema":"public","table":"note"},{"event":"*","schema":"public","table":"task"}
                        """, token: token)
                    clients.append((user, topic, client))
                }
            }
            try await daemon.waitForSubscribers(clients.count, kind: "realtime")

            let reader = try database.connect()
            var expected: [String: [String]] = [:]
            var notes: Set<Int> = []
            var tasks: Set<Int> = []
            var nextID = 1
            for step in 0..<60 {
                let before = try Dictionary(uniqueKeysWithValues: Self.users.map { ($0, try Self.visibleRows(as: $0, role: role, on: reader)) })
                var statements: [String] = []
                var touched: [String] = []
                var inserted: Set<String> = []
                var deleted: Set<String> = []
                var changesMembership = false
                func owner() -> String { Self.users[random.next(upTo: Self.users.count)] }
                let kind = random.next(upTo: 12)
                switch kind {
                case 0, 1:
                    let id = nextID
                    nextID += 1
                    statements.append("INSERT INTO note VALUES (\(id), '\(owner())', 'n\(step)', 'secret\(step)')")
                    touched.append("note \(id)"); inserted.insert("note \(id)"); notes.insert(id)
                case 2 where !notes.isEmpty:
                    let id = notes.randomElement(using: &random)
                    statements.append("UPDATE note SET owner = '\(owner())', body = 'n\(step)' WHERE id = \(id)")
                    touched.append("note \(id)")
                case 3 where !notes.isEmpty:
                    let id = notes.randomElement(using: &random)
                    statements.append("DELETE FROM note WHERE id = \(id)")
                    touched.append("note \(id)"); deleted.insert("note \(id)"); notes.remove(id)
                case 4, 5:
                    let id = nextID
                    nextID += 1
                    statements.append("INSERT INTO task VALUES (\(id), \(1 + random.next(upTo: 3)), 't\(step)', false)")
                    touched.append("task \(id)"); inserted.insert("task \(id)"); tasks.insert(id)
                case 6 where !tasks.isEmpty:
                    let id = tasks.randomElement(using: &random)
                    statements.append("UPDATE task SET team = \(1 + random.next(upTo: 3)), title = 't\(step)' WHERE id = \(id)")
                    touched.append("task \(id)")
                case 7 where !tasks.isEmpty:
                    let id = tasks.randomElement(using: &random)
                    statements.append("UPDATE task SET archived = NOT archived WHERE id = \(id)")
                    touched.append("task \(id)")
                case 8 where !tasks.isEmpty:
                    let id = tasks.randomElement(using: &random)
                    statements.append("DELETE FROM task WHERE id = \(id)")
                    touched.append("task \(id)"); deleted.insert("task \(id)"); tasks.remove(id)
                case 9:
                    // A membership change, with a new task of that team in the same transaction.
                    let (team, member) = (1 + random.next(upTo: 3), owner())
                    let joined = try writer.execute("SELECT 1 FROM team_member WHERE team = \(team) AND member = '\(member)'").rows.isEmpty
                    statements.append(joined
                        ? "INSERT INTO team_member VALUES (\(team), '\(member)')"
                        : "DELETE FROM team_member WHERE team = \(team) AND member = '\(member)'")
                    let id = nextID
                    nextID += 1
                    statements.append("INSERT INTO task VALUES (\(id), \(team), 't\(step)', false)")
                    touched.append("task \(id)"); inserted.insert("task \(id)"); tasks.insert(id)
                    changesMembership = true
                case 10:
                    // Rolled back: nobody gets anything.
                    let id = nextID
                    nextID += 1
                    try writer.execute("BEGIN")
                    try writer.execute("INSERT INTO note VALUES (\(id), '\(owner())', 'rolled back', NULL)")
                    try writer.execute("INSERT INTO task VALUES (\(id), 1, 'rolled back', false)")
                    try writer.execute("ROLLBACK")
                    continue
                default:
                    // Two rows in one transaction.
                    let (first, second) = (nextID, nextID + 1)
                    nextID += 2
                    statements.append("INSERT INTO note VALUES (\(first), '\(owner())', 'n\(step)', NULL)")
                    statements.append("INSERT INTO task VALUES (\(second), \(1 + random.next(upTo: 3)), 't\(step)', false)")
                    touched += ["note \(first)", "task \(second)"]
                    inserted.formUnion(["note \(first)", "task \(second)"])
                    notes.insert(first); tasks.insert(second)
                }
                guard !statements.isEmpty else { continue }
                // Policies read team_member when the daemon checks: a change to it waits for the checks of what came before.
                if changesMembership { try await Task.sleep(for: .milliseconds(400)) }
                try writer.execute("BEGIN; " + statements.joined(separator: "; ") + "; COMMIT")
                for user in Self.users {
                    let after = try Self.visibleRows(as: user, role: role, on: reader)
                    expected[user, default: []] += Self.expected(
                        touched: touched, before: before[user]!, after: after, inserted: inserted, deleted: deleted
                    )
                }
            }

            var mismatches: [String] = []
            for (user, topic, client) in clients {
                let wanted = expected[user, default: []]
                let received = (try? await client.takeChanges(wanted.count, topic: topic, within: 15)) ?? []
                let got = received.map(Self.summary)
                if got != wanted { mismatches.append("\(topic): expected \(wanted), got \(got)") }
                if let leak = received.first(where: { $0.jsonText.contains("secret") }) { mismatches.append("\(topic): a secret column: \(leak.jsonText)") }
            }
            try await Task.sleep(for: .milliseconds(300))
            for (_, topic, client) in clients where client.unread.contains(where: { $0.contains("postgres_changes") }) {
                mismatches.append("\(topic): more than expected: \(client.unread.filter { $0.contains("postgres_changes") })")
            }
            cell.report("RowSecurityPropertyTests", passed: mismatches.isEmpty ? 1 : 0, total: 1)
            #expect(mismatches.isEmpty, "seed \(seed): \(mismatches.joined(separator: "\n"))")
            let statistics = try await daemon.statistics()
            // One cohort per user, whatever their devices.
            #expect(statistics.rowSecurity?.cohorts == Self.users.count, "\(String(describing: statistics.rowSecurity))")
            for (_, _, client) in clients { await client.close() }
        }
    }
}

extension Set where Element == Int {
    /// An element chosen by `random`, in a stable order so a seed replays.
    func randomElement(using random: inout SeededRandom) -> Int {
        let sorted = self.sorted()
        return sorted[random.next(upTo: sorted.count)]
    }
}
