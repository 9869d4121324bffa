import Foundation
import Herald
import HeraldPostgres
import Testing

/// Runs corpus cases in one database of one matrix cell and checks each:
///
/// - the write behaves as it does without pgherald: the same result or
///   error, and the same rows stored, in an unwatched twin schema;
/// - the events, applied to the rows stored before the case, give the rows
///   stored after it, read back with `row_to_json`: so every event's row is
///   the row as stored, and no change goes unpublished;
/// - each event's `pk` is its row's key.
///
/// Every statement runs as an application role that has only its tables'
/// privileges, with a `search_path` that puts functions named like
/// pgherald's first.
final class CorpusRun {
    let cell: TriggerCell
    let database: TestDatabase
    /// A superuser session with the writer's settings, which shape the rows' JSON.
    private let checker: LibpqConnection
    private let writers: [String: LibpqConnection]
    private let channel: String
    private var lastJournalID = "0"
    let role: String

    static let watched = #"Wätched "s.q" Ω"#
    static let plain = #"plain "s.q" Ω"#
    /// Settings that change how rows are written, in every session.
    static let sessionSettings = "SET TimeZone = 'Asia/Kathmandu'; SET IntervalStyle = 'postgres_verbose'; SET extra_float_digits = 1"

    init(_ cell: TriggerCell, shapes: String) throws {
        self.cell = cell
        database = try TestDatabase.create(enrolment: false, install: false, on: cell.cluster)
        role = "app_\(database.name)"
        let admin = try database.connect()
        try admin.execute("""
            CREATE SCHEMA ext;
            CREATE EXTENSION hstore SCHEMA ext; CREATE EXTENSION citext SCHEMA ext; CREATE EXTENSION cube SCHEMA ext;
            """)
        let schemas = [Self.watched, Self.plain]
        for schema in schemas {
            let name = try admin.escapeIdentifier(schema)
            try admin.execute("CREATE SCHEMA \(name); SET search_path = \(name), ext; \(TriggerCorpus.types); \(shapes); RESET search_path")
        }
        try admin.execute("""
            \(TriggerCorpus.hijacker)
            CREATE FUNCTION public.corpus_rows(schema_name name) RETURNS TABLE (table_name name, row_json text)
            LANGUAGE plpgsql AS $$
            DECLARE
                t name;
            BEGIN
                FOR t IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                          WHERE n.nspname = schema_name AND c.relkind = 'r' ORDER BY 1 LOOP
                    RETURN QUERY EXECUTE format('SELECT %L::name, row_to_json("corpus row")::text FROM ONLY %I.%I AS "corpus row"', t, schema_name, t);
                END LOOP;
            END $$;
            CREATE ROLE \(role) LOGIN;
            """)
        try Installer.install(on: admin, schemas: [Self.watched], durability: cell.durability, triggers: cell.triggers)
        #expect(try Installer.usesNativeTriggers(on: admin) == (cell.triggers == .native))
        try Self.grantApplicationPrivileges(to: role, on: admin)
        channel = try #require(try Journal.notificationChannel(on: admin))
        checker = admin
        try checker.execute(Self.sessionSettings)
        try checker.execute("LISTEN \(try checker.escapeIdentifier(channel))")
        var writers: [String: LibpqConnection] = [:]
        for schema in schemas {
            let writer = try LibpqConnection.connect(ConnectionString("\(database.connInfo) user=\(role)"))
            try writer.execute("\(Self.sessionSettings); SET search_path = hijack, pg_catalog, \(try writer.escapeIdentifier(schema)), ext, pg_temp")
            writers[schema] = writer
        }
        self.writers = writers
    }

    /// What an application role gets: its tables and sequences, nothing of pgherald.
    private static func grantApplicationPrivileges(to role: String, on admin: LibpqConnection) throws {
        for schema in [Self.watched, Self.plain, "ext", "hijack"] {
            let name = try admin.escapeIdentifier(schema)
            try admin.execute("""
                GRANT USAGE ON SCHEMA \(name) TO \(role);
                GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA \(name) TO \(role);
                GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA \(name) TO \(role);
                """)
        }
    }

    /// What a statement did, as the application sees it.
    private enum Outcome: Equatable, CustomStringConvertible {
        case rows([[String?]], affected: Int?)
        case failed(String)

        var description: String {
            switch self {
            case .rows(let rows, let affected): "\(rows.count) rows \(rows.prefix(3)) (affected \(affected.map(String.init) ?? "-"))"
            case .failed(let message): "error: \(message)"
            }
        }
    }

    /// Runs `item` and returns what was wrong; empty when it passed.
    func check(_ item: TriggerCorpus.Case) throws -> [String] {
        let before = try storedRows()
        let plainOutcome = try run(item, in: Self.plain)
        let watchedOutcome = try run(item, in: Self.watched)
        let after = try storedRows()
        let plainAfter = try storedRows(in: Self.plain)
        let events = try newEvents()
        var problems: [String] = []
        if plainOutcome != watchedOutcome {
            problems.append("the write behaves differently with pgherald: \(watchedOutcome), without: \(plainOutcome)")
        }
        if after != plainAfter {
            problems.append("the rows stored differ from the unwatched twin's")
        }
        if case .owner = item.runner {
            // Schema changes reshape stored rows without changing any: no event, and a new baseline.
            if !events.isEmpty { problems.append("schema changes published \(events.count) events") }
        } else {
            problems += reconcile(before: before, events: events, after: after)
        }
        return problems
    }

    private func run(_ item: TriggerCorpus.Case, in schema: String) throws -> Outcome {
        switch item.runner {
        case .application:
            do {
                let result = try writers[schema]!.execute(item.sql)
                return .rows(result.rows, affected: result.affectedRows)
            } catch {
                return .failed(error.message.components(separatedBy: "\n")[0])
            }
        case .owner:
            let name = try checker.escapeIdentifier(schema)
            try checker.execute("SET search_path = \(name), ext; \(item.sql); RESET search_path")
            try Self.grantApplicationPrivileges(to: role, on: checker)
            return .rows([], affected: nil)
        case .psql(let input):
            return try runPsql(item.sql, input: input, schema: schema)
        }
    }

    /// COPY FROM STDIN through psql, as the application role.
    private func runPsql(_ sql: String, input: String, schema: String) throws -> Outcome {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", "\(database.connInfo) user=\(role)", "-c", sql]
        let quoted = "\"" + schema.replacingOccurrences(of: "\"", with: "\"\"") + "\""
        var environment = ProcessInfo.processInfo.environment
        environment["PGOPTIONS"] = "-c search_path=\(quoted.replacingOccurrences(of: " ", with: "\\ ")),ext -c TimeZone=Asia/Kathmandu"
        process.environment = environment
        let standardInput = Pipe()
        let standardError = Pipe()
        process.standardInput = standardInput
        process.standardError = standardError
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        standardInput.fileHandleForWriting.write(Data(input.utf8))
        try standardInput.fileHandleForWriting.close()
        let errors = standardError.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return .failed(String(decoding: errors, as: UTF8.self)) }
        return .rows([], affected: nil)
    }

    /// Every stored row of every table of `schema`, as `row_to_json` writes it, by table.
    private func storedRows(in schema: String = CorpusRun.watched) throws -> [String: [JSONValue: Int]] {
        var tables: [String: [JSONValue: Int]] = [:]
        for row in try checker.execute("SELECT table_name, row_json FROM public.corpus_rows($1)", parameters: [schema]).rows {
            let table = row[0] ?? ""
            tables[table, default: [:]][try JSONParser.parse(row[1] ?? "null"), default: 0] += 1
        }
        return tables.filter { !$0.value.isEmpty }
    }

    /// The events published since the last call, in order.
    private func newEvents() throws -> [JSONValue] {
        var texts: [String] = []
        if cell.durability == .durable {
            let rows = try checker.execute("""
                SELECT coalesce(last_id, id)::text, event FROM pgherald.journal WHERE id > $1::bigint ORDER BY id
                """, parameters: [lastJournalID]).rows
            if let last = rows.last?[0] { lastJournalID = last }
            texts = rows.map { $0[1] ?? "" }
        } else {
            // Notifications arrive in commit order: the sentinel comes after every event before it.
            let sentinel = "corpus sentinel \(UInt64.random(in: 0...UInt64.max))"
            try checker.execute("SELECT pg_notify($1, $2)", parameters: [channel, sentinel])
            var done = false
            let deadline = ContinuousClock.now + .seconds(30)
            while true {
                // The sentinel's own statement may already have read everything into libpq's buffer.
                checker.takeNotifications { _, payload, _ in
                    let text = String(decoding: payload, as: UTF8.self)
                    if text == sentinel { done = true } else { texts.append(text) }
                }
                if done { break }
                try checker.awaitInput(until: deadline)
            }
        }
        return try texts.flatMap { $0.split(separator: "\u{1E}") }.map { try JSONParser.parse(String($0)) }
    }

    /// Applies `events` to `before` and compares with `after`.
    private func reconcile(before: [String: [JSONValue: Int]], events: [JSONValue], after: [String: [JSONValue: Int]]) -> [String] {
        var rows = before
        var problems: [String] = []
        for event in events {
            guard let object = event.objectValue, let op = object["op"]?.stringValue, let published = object["table"]?.stringValue else {
                problems.append("not an event: \(event)")
                continue
            }
            // A partition's row publishes under its partitioned table and names the partition it is stored in.
            let table = object["partition"]?.stringValue ?? published
            if let partition = object["partition"]?.stringValue, published != "part" || !partition.hasPrefix("part_") {
                problems.append("a row of partition \(partition) published under \(published)")
            }
            if object["partition"] == nil, published == "part", op != "TRUNCATE" {
                problems.append("a row of a partitioned table published without its partition: \(event)")
            }
            if object["schema"]?.stringValue != Self.watched {
                problems.append("an event of schema \(object["schema"].map { "\($0)" } ?? "none")")
            }
            if object["omitted"] != nil {
                problems.append("an event without its rows: \(event)")
            }
            let new = object["new"] ?? .null
            let old = object["old"] ?? .null
            switch op {
            case "INSERT":
                rows[table, default: [:]][new, default: 0] += 1
            case "UPDATE", "DELETE":
                if let count = rows[table]?[old], count > 0 {
                    rows[table]![old] = count - 1
                } else {
                    problems.append("\(op) on \(table): its old row was not stored before: \(old)")
                }
                if op == "UPDATE" { rows[table, default: [:]][new, default: 0] += 1 }
            case "TRUNCATE":
                rows[table] = [:]
            default:
                problems.append("an unknown op: \(op)")
            }
            if op != "TRUNCATE" { problems += keyProblems(object, row: op == "DELETE" ? old : new) }
        }
        let reconciled = rows.mapValues { $0.filter { $0.value > 0 } }.filter { !$0.value.isEmpty }
        for table in Set(reconciled.keys).union(after.keys) where reconciled[table] != after[table] {
            let stored = after[table] ?? [:]
            let published = reconciled[table] ?? [:]
            let missing = stored.filter { published[$0.key] != $0.value }.keys.prefix(2)
            let extra = published.filter { stored[$0.key] != $0.value }.keys.prefix(2)
            problems.append("\(table): the events do not give the rows as stored; stored but not published: \(Array(missing)), published but not stored: \(Array(extra))")
        }
        return problems
    }

    /// The event's `pk` names its row's key columns with the row's values.
    private func keyProblems(_ event: JSONObject, row: JSONValue) -> [String] {
        guard let key = event["pk"]?.objectValue else { return [] }
        let problems = key.compactMap { member in
            row.objectValue?[member.key] == member.value ? nil : "pk \(member.key) is \(member.value), the row has \(row.objectValue?[member.key].map { "\($0)" } ?? "no such column")"
        }
        return problems
    }
}
