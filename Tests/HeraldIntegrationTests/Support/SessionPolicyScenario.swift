import Foundation
import Herald
import HeraldPostgres

/// The schema, writes and truth that the leak property tests over every
/// path share. Each user has sessions that a policy tells apart (a revoked
/// one), a policy calls a SECURITY DEFINER function that caches the
/// caller's teams in a transaction-local setting, and writes move rows into
/// and out of view, change their keys, and change team membership. Tasks
/// are a partitioned table, judged by its own policies: a partition per
/// team, one of them sub-partitioned, a default partition, one attached
/// half-way, and rows that move between them. The truth is read by the
/// test, as each session, before and after every transaction.
struct SessionPolicyScenario {
    static let users = ["ann", "ben", "cat"]
    /// Every major once, durable (row-level security needs the journal), the
    /// trigger kind alternating from major to major so that each kind meets
    /// old and new servers. `NativeTriggerTests` shows that both kinds publish
    /// the same bytes on every major, so every pair would double the run, not what it proves.
    static let cells: [TriggerCell] = {
        let durable = TriggerCell.all.filter { $0.durability == .durable }
        let majors = Array(Set(durable.map(\.cluster.major))).sorted()
        return durable.filter { cell in
            cell.triggers == (majors.firstIndex(of: cell.cluster.major)!.isMultiple(of: 2) ? .native : .plpgsql)
        }
    }()

    /// One write's keys: a row inserted, deleted, changed in place, given a new key, or moved to another
    /// partition (which PostgreSQL does as a delete and an insert).
    enum Touch {
        case inserted(String), deleted(String), changed(String), moved(from: String, to: String), repartitioned(String)
    }

    /// The step that attaches the partition of team 5, after which tasks may be written to it.
    static let attachingStep = 12

    /// One transaction: its statements, the keys it touches, whether it changes who is in which team.
    struct Step {
        var statements: [String] = []
        var touches: [Touch] = []
        var changesMembership = false
        /// Rolled back rather than committed: nobody gets anything.
        var rolledBack = false

        /// The transaction as one script.
        var script: String { "BEGIN; " + statements.joined(separator: "; ") + (rolledBack ? "; ROLLBACK" : "; COMMIT") }
    }

    let role: String
    var random: SeededRandom
    private var notes: Set<Int> = []
    /// Each task's team, which names its partition.
    private var tasks: [Int: Int] = [:]
    private var nextID = 1

    /// Creates `role`, the tables and their policies, and puts users in teams and revokes sessions at random.
    init(on database: TestDatabase, role: String, seed: UInt64) throws {
        self.role = role
        random = SeededRandom(seed: seed)
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
            CREATE TABLE task (id int, team int NOT NULL, title text, archived bool NOT NULL DEFAULT false, PRIMARY KEY (id, team))
              PARTITION BY LIST (team);
            CREATE TABLE task_1 PARTITION OF task FOR VALUES IN (1);
            CREATE TABLE task_2 PARTITION OF task FOR VALUES IN (2) PARTITION BY RANGE (id);
            CREATE TABLE task_2_low PARTITION OF task_2 FOR VALUES FROM (MINVALUE) TO (20);
            CREATE TABLE task_2_high PARTITION OF task_2 FOR VALUES FROM (20) TO (MAXVALUE);
            CREATE TABLE task_rest PARTITION OF task DEFAULT;
            CREATE TABLE task_5 (LIKE task INCLUDING DEFAULTS);
            ALTER TABLE task ENABLE ROW LEVEL SECURITY;
            GRANT SELECT ON task TO \(role);
            CREATE POLICY of_my_team ON task FOR SELECT TO \(role) USING (team = ANY (my_teams()));
            CREATE POLICY not_archived ON task AS RESTRICTIVE FOR SELECT TO \(role) USING (NOT archived);
            """)
        for user in Self.users {
            for team in [1, 2, 3, 4, 5] where random.next(upTo: 2) == 0 {
                try database.execute("INSERT INTO team_member VALUES (\(team), '\(user)')")
            }
            // One live session of each user is revoked: its notes stop, its tasks go on.
            if random.next(upTo: 2) == 0 { try database.execute("INSERT INTO revoked_session VALUES ('\(user)-laptop')") }
        }
    }

    /// Each user's two live sessions and one that connects at the end.
    static func sessions(of user: String) -> [String] { ["\(user)-phone", "\(user)-laptop", "\(user)-late"] }

    static func claims(role: String, user: String, session: String) -> String {
        #"{"role":"\#(role)","sub":"\#(user)","session_id":"\#(session)"}"#
    }

    /// A session's view: `table id` to `values`.
    func visibleRows(as user: String, session: String, on connection: LibpqConnection) throws -> [String: String] {
        let (results, error) = try connection.executeScript("""
            BEGIN READ ONLY;
            SET LOCAL ROLE \(role);
            SELECT set_config('request.jwt.claims', '\(Self.claims(role: role, user: user, session: session))', true);
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

    /// The next transaction, at random.
    /// - Parameter membership: whether it may change team membership.
    mutating func step(_ step: Int, membership: Bool, on writer: LibpqConnection) throws -> Step {
        var next = Step()
        func owner() -> String { Self.users[random.next(upTo: Self.users.count)] }
        func body() -> String { random.next(upTo: 2) == 0 ? "n\(step)" : "x\(step)" }
        func newID() -> Int {
            defer { nextID += 1 }
            return nextID
        }
        /// A task's team: team 5 has no partition, so no row, until it is attached.
        func team() -> Int { 1 + random.next(upTo: step > Self.attachingStep ? 5 : 4) }
        if step == Self.attachingStep {
            next.statements.append("ALTER TABLE task ATTACH PARTITION task_5 FOR VALUES IN (5)")
            return next
        }
        let kind = random.next(upTo: 11)
        switch !membership && kind == 8 ? 9 : kind {
        case 0, 1:
            let id = newID()
            next.statements.append("INSERT INTO note VALUES (\(id), '\(owner())', '\(body())', 'secret\(step)')")
            next.touches.append(.inserted("note \(id)")); notes.insert(id)
        case 2 where !notes.isEmpty:
            let id = notes.randomElement(using: &random)
            next.statements.append("UPDATE note SET owner = '\(owner())', body = '\(body())' WHERE id = \(id)")
            next.touches.append(.changed("note \(id)"))
        case 3 where !notes.isEmpty:
            // A new key, and perhaps a new owner: who saw the old row sees it go under its old key.
            let (id, moved) = (notes.randomElement(using: &random), newID())
            next.statements.append("UPDATE note SET id = \(moved), owner = '\(owner())' WHERE id = \(id)")
            next.touches.append(.moved(from: "note \(id)", to: "note \(moved)")); notes.remove(id); notes.insert(moved)
        case 4 where !notes.isEmpty:
            let id = notes.randomElement(using: &random)
            next.statements.append("DELETE FROM note WHERE id = \(id)")
            next.touches.append(.deleted("note \(id)")); notes.remove(id)
        case 5, 6:
            let (id, team) = (newID(), team())
            next.statements.append("INSERT INTO task VALUES (\(id), \(team), 't\(step)', false)")
            next.touches.append(.inserted("task \(id)")); tasks[id] = team
        case 7 where !tasks.isEmpty:
            let id = Set(tasks.keys).randomElement(using: &random)
            guard random.next(upTo: 2) == 0 else {
                next.statements.append("UPDATE task SET archived = NOT archived WHERE id = \(id)")
                next.touches.append(.changed("task \(id)"))
                break
            }
            // A new team is a new key, and most often a new partition.
            let (old, new) = (tasks[id]!, team())
            next.statements.append("UPDATE task SET team = \(new), title = 't\(step)' WHERE id = \(id)")
            let moves = Self.partition(team: old, id: id) != Self.partition(team: new, id: id)
            next.touches.append(moves ? .repartitioned("task \(id)") : .changed("task \(id)")); tasks[id] = new
        case 8:
            // A membership change, and a task of that team in the same transaction.
            let (team, member) = (1 + random.next(upTo: 3), owner())
            let joined = try writer.execute("SELECT 1 FROM team_member WHERE team = \(team) AND member = '\(member)'").rows.isEmpty
            next.statements.append(joined
                ? "INSERT INTO team_member VALUES (\(team), '\(member)')"
                : "DELETE FROM team_member WHERE team = \(team) AND member = '\(member)'")
            let id = newID()
            next.statements.append("INSERT INTO task VALUES (\(id), \(team), 't\(step)', false)")
            next.touches.append(.inserted("task \(id)")); tasks[id] = team
            next.changesMembership = true
        case 10:
            let id = newID()
            next.statements += ["INSERT INTO note VALUES (\(id), '\(owner())', 'rolled back', NULL)", "INSERT INTO task VALUES (\(id), 1, 'rolled back', false)"]
            next.rolledBack = true
        default:
            // Two tables in one transaction: one batch, every cohort judged in it.
            let (first, second, team) = (newID(), newID(), team())
            next.statements.append("INSERT INTO note VALUES (\(first), '\(owner())', '\(body())', NULL)")
            next.statements.append("INSERT INTO task VALUES (\(second), \(team), 't\(step)', false)")
            next.touches += [.inserted("note \(first)"), .inserted("task \(second)")]
            notes.insert(first); tasks[second] = team
        }
        return next
    }

    /// The leaf partition that holds a task.
    static func partition(team: Int, id: Int) -> String {
        switch team {
        case 1: "task_1"
        case 2: id < 20 ? "task_2_low" : "task_2_high"
        case 5: "task_5"
        default: "task_rest"
        }
    }

    /// What a session gets from one transaction, from what it saw before and after it, as `TYPE table id values`.
    static func expected(_ touches: [Touch], before: [String: String], after: [String: String]) -> [String] {
        touches.flatMap { touch -> [String] in
            switch touch {
            case .inserted(let key): [after[key].map { "INSERT \(key) \($0)" }].compactMap { $0 }
            case .deleted(let key): [before[key].map { "DELETE \(key) \($0)" }].compactMap { $0 }
            case .changed(let key): [after[key].map { "UPDATE \(key) \($0)" } ?? before[key].map { "DELETE \(key) \($0)" }].compactMap { $0 }
            case .moved(let old, let new): [after[new].map { "UPDATE \(new) \($0)" } ?? before[old].map { "DELETE \(old) \($0)" }].compactMap { $0 }
            case .repartitioned(let key): [before[key].map { "DELETE \(key) \($0)" }, after[key].map { "INSERT \(key) \($0)" }].compactMap { $0 }
            }
        }
    }

    /// Whether a change passes the filtered streams' condition: notes whose body starts with `n`, as the session sees them.
    static func passesFilter(_ summary: String) -> Bool {
        let parts = summary.split(separator: " ", maxSplits: 3)
        guard parts.count == 4, parts[1] == "note" else { return false }
        return parts[3].split(separator: "/", maxSplits: 1).last?.hasPrefix("n") == true
    }

    /// A row's values as a view gives them: `owner/body` of a note, `team/title/archived` of a task.
    static func values(table: String, row: (String) -> JSONValue?) -> String {
        if table == "note" {
            return [row("owner"), row("body")].compactMap { $0?.stringValue }.joined(separator: "/")
        }
        let archived = row("archived") == .bool(true) ? "t" : "f"
        return [row("team").map(\.jsonText) ?? "", row("title")?.stringValue ?? "", archived].joined(separator: "/")
    }

    /// An event of an NDJSON or SSE stream as `TYPE table id values`, as a client's cache applies it.
    static func summary(_ event: Event) -> String {
        let removal = event.operation == .delete || event.leftView
        let row = (removal ? event.old : event.new) ?? [:]
        let id = row["id"].map(\.jsonText) ?? "?"
        return "\(removal ? "DELETE" : event.operation.rawValue) \(event.table.name) \(id) \(values(table: event.table.name) { row[$0] })"
    }

    /// A Supabase `postgres_changes` payload as `TYPE table id values`, from the old record for a DELETE.
    static func summary(_ change: JSONValue) -> String {
        guard let data = change["data"], let type = data["type"]?.stringValue, let table = data["table"]?.stringValue else { return "?" }
        let row = type == "DELETE" ? data["old_record"] : data["record"]
        let id = row?["id"].map(\.jsonText) ?? "?"
        return "\(type) \(table) \(id) \(values(table: table) { row?[$0] })"
    }
}

extension Set where Element == Int {
    /// An element chosen by `random`, in a stable order so a seed replays.
    func randomElement(using random: inout SeededRandom) -> Int {
        let sorted = self.sorted()
        return sorted[random.next(upTo: sorted.count)]
    }
}
