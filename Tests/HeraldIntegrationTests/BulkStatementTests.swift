import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// Statements that change many rows publish once per statement (publisher
    /// version 6), and every row still arrives as its own event.
    @Suite
    struct BulkStatementTests {
        /// 10 rows take the static path for a few rows, 250 the dynamic one;
        /// on every major, with both kinds of trigger and both durabilities.
        @Test(arguments: TriggerCell.all, [10, 250])
        func manyRowStatementsArriveWholeInOrderWithOldRows(_ cell: TriggerCell, _ rows: Int) async throws {
            let database = try TestDatabase.create(install: false, on: cell.cluster)
            try Installer.install(on: database.connect(), durability: cell.durability, triggers: cell.triggers)
            let daemon = try await RunningListener(database: database)
            let connection = try database.connect()
            // 250 rows: three journal batches, and far more than one notification holds.
            try connection.execute("INSERT INTO student (first_name, last_name) SELECT 'n' || g, 'bulk' FROM generate_series(1, \(rows)) AS g")
            try connection.execute("UPDATE student SET first_name = first_name || '!' WHERE last_name = 'bulk'")
            try connection.execute("DELETE FROM student WHERE last_name = 'bulk'")

            let events = try await daemon.inbox.take(3 * rows, within: 20)
            #expect(events.map { Int($0.id)! } == events.map { Int($0.id)! }.sorted())
            #expect(events.map(\.count) == Array(1...UInt64(3 * rows)))
            let inserts = events[0..<rows], updates = events[rows..<(2 * rows)], deletes = events[(2 * rows)...]
            #expect(inserts.allSatisfy { $0.operation == .insert && $0.old == nil })
            #expect(inserts.map { $0.new?["first_name"]?.stringValue } == (1...rows).map { "n\($0)" })
            #expect(updates.allSatisfy { $0.operation == .update })
            // Old and new rows pair up: the same key, and the name before and after.
            #expect(updates.allSatisfy { $0.old?["id"] == $0.new?["id"] && $0.primaryKey?["id"] == $0.new?["id"] })
            #expect(updates.allSatisfy { $0.new?["first_name"]?.stringValue == ($0.old?["first_name"]?.stringValue).map { $0 + "!" } })
            #expect(deletes.allSatisfy { $0.operation == .delete && $0.new == nil && $0.old?["last_name"] == .string("bulk") })
            #expect(Set(deletes.compactMap { $0.primaryKey?["id"] }) == Set(inserts.compactMap { $0.new?["id"] }))
            // Statements that change no row publish nothing.
            try connection.execute("UPDATE student SET first_name = 'none' WHERE false")
            try connection.execute("DELETE FROM student WHERE false")
            try connection.execute("INSERT INTO student (first_name, last_name) SELECT 'none', 'none' WHERE false")
            try await Task.sleep(for: .milliseconds(300))
            #expect(daemon.inbox.count == 0, "nothing twice, and nothing for no row")
            try await daemon.stop()
        }

        /// The many-row path writes each row's object from its columns' JSON
        /// instead of calling row_to_json; for every kind of column, a dropped
        /// one, a two-column key that is not the first, and a table with no
        /// columns, its text must be row_to_json's, byte for byte.
        @Test func manyRowStatementsWriteEachRowAsRowToJSONDoes() throws {
            let database = try TestDatabase.create(enrolment: false)
            try database.execute("""
                CREATE TYPE pair AS (a int, b text);
                CREATE DOMAIN small AS int2;
                CREATE TABLE typed (
                    gone int, n numeric, f float8, i2 small, i4 int4, b bool, t text, j json, jb jsonb, arr int[], c pair,
                    at timestamptz, u uuid, "we""ird,näme" text, id bigint, PRIMARY KEY (t, id));
                ALTER TABLE typed DROP COLUMN gone;
                CREATE TABLE bare ();
                CREATE TABLE expected (step text, id bigint, row_json text);
                SELECT pgherald.exclude('expected');
                """)
            try database.execute(#"""
                INSERT INTO typed
                SELECT CASE WHEN g % 3 = 0 THEN 'NaN' ELSE g / 7.0 END, CASE WHEN g % 5 = 0 THEN '-Infinity' ELSE g * 1.5 END,
                       g, -g * 1000, g % 2 = 0, E'q"\\\n' || g, '{"a": [1, "\u0000"], "a": 2}', '{"b": null}', ARRAY[g, NULL],
                       ROW(g, 'x,y')::pair, '2020-01-01 10:00+05', '00000000-0000-0000-0000-000000000001', NULL, g
                  FROM generate_series(1, 100) AS g
                """#)
            try database.execute("INSERT INTO expected SELECT 'insert', id, replace(row_to_json(x)::text, '\\u0000', '\\ufffd') FROM typed AS x")
            try database.execute("UPDATE typed SET f = f + 1, \"we\"\"ird,näme\" = 'é'")
            try database.execute("INSERT INTO expected SELECT 'update', id, replace(row_to_json(x)::text, '\\u0000', '\\ufffd') FROM typed AS x")
            try database.execute("DELETE FROM typed")
            try database.execute("INSERT INTO bare SELECT FROM generate_series(1, 70)")

            let compared = try database.execute(#"""
                WITH events AS (
                    -- json's -> fails on \u0000, so both sides read it as U+FFFD.
                    SELECT replace(e, '\u0000', '\ufffd')::json AS event
                      FROM pgherald.journal, unnest(string_to_array(journal.event, chr(30))) AS e
                ), typed_events AS (
                    SELECT event ->> 'op' AS op, (CASE event ->> 'op' WHEN 'DELETE' THEN event -> 'old' ELSE event -> 'new' END ->> 'id')::bigint AS id,
                           (event -> 'new')::text AS new, (event -> 'old')::text AS old, (event -> 'pk')::text AS pk
                      FROM events WHERE event ->> 'table' = 'typed'
                )
                SELECT op, count(*),
                       count(*) FILTER (WHERE pk = concat('{"t":', to_json(E'q"\\\n' || e.id)::text, ',"id":', e.id, '}')
                                          AND new IS NOT DISTINCT FROM (SELECT row_json FROM expected WHERE step = lower(op) AND id = e.id)
                                          AND old IS NOT DISTINCT FROM CASE op WHEN 'INSERT' THEN 'null'
                                              ELSE (SELECT row_json FROM expected WHERE step = CASE op WHEN 'UPDATE' THEN 'insert' ELSE 'update' END AND id = e.id) END
                                          OR op = 'DELETE' AND new = 'null'
                                             AND old = (SELECT row_json FROM expected WHERE step = 'update' AND id = e.id))
                  FROM typed_events AS e GROUP BY op
                UNION ALL
                SELECT 'bare', count(*), count(*) FILTER (WHERE (event -> 'new')::text = '{}' AND (event -> 'pk')::text = 'null')
                  FROM events WHERE event ->> 'table' = 'bare'
                ORDER BY 1
                """#)
            #expect(compared.rows == [
                ["DELETE", "100", "100"], ["INSERT", "100", "100"], ["UPDATE", "100", "100"], ["bare", "70", "70"],
            ])
        }

        /// A statement's events of every size arrive once each, in order:
        /// notify-only packs them into notifications in the query, some alone
        /// and some too large for any notification; durable batches them in
        /// the journal, where every batch must be a run of consecutive events.
        @Test(arguments: [Durability.durable, .notifyOnly])
        func eventsOfEverySizeArriveInOrder(_ durability: Durability) async throws {
            let database = try TestDatabase.create(durability: durability)
            let daemon = try await RunningListener(database: database)
            try database.execute("CREATE TABLE document (id int PRIMARY KEY, body text)")
            // Every 10th row is too large to notify, every 10th from 5 needs half a notification, the rest vary.
            try database.execute("""
                INSERT INTO document
                SELECT g, repeat('x', CASE g % 10 WHEN 0 THEN 12000 WHEN 5 THEN 4500 ELSE g * 37 % 3000 END)
                  FROM generate_series(1, 200) AS g
                """)
            let events = try await daemon.inbox.take(200, within: 20)
            #expect(events.map(\.count) == Array(1...UInt64(200)))
            #expect(events.map { $0.primaryKey?["id"] } == (1...200).map { .number(JSONNumber(Int64($0))) })
            #expect(events.filter(\.rowDataOmitted).count == (durability == .durable ? 0 : 20))
            #expect(events.allSatisfy { event in
                guard case .number(let number)? = event.primaryKey?["id"], let id = Int(number.description) else { return false }
                if event.rowDataOmitted { return id % 10 == 0 }
                return event.new?["body"]?.stringValue?.count == (id % 10 == 0 ? 12000 : id % 10 == 5 ? 4500 : id * 37 % 3000)
            })
            try await Task.sleep(for: .milliseconds(300))
            #expect(daemon.inbox.count == 0, "nothing twice")
            try await daemon.stop()
        }

        /// The many-row query runs with more work memory and no JIT; the
        /// writer's own settings are back when its statement returns.
        @Test(arguments: [Durability.durable, .notifyOnly])
        func aManyRowStatementLeavesTheWritersSettingsAsTheyWere(_ durability: Durability) throws {
            let database = try TestDatabase.create(durability: durability)
            let connection = try database.connect()
            try connection.execute("SET work_mem = '5MB'")
            try connection.execute("BEGIN")
            try connection.execute("SET LOCAL jit = on")
            try connection.execute("INSERT INTO student (first_name, last_name) SELECT 'n' || g, 'bulk' FROM generate_series(1, 100) AS g")
            let during = try connection.execute("SELECT current_setting('work_mem'), current_setting('jit')")
            try connection.execute("COMMIT")
            let after = try connection.execute("SELECT current_setting('work_mem'), current_setting('jit')")
            #expect(during.rows == [["5MB", "on"]])
            #expect(after.rows == [["5MB", "on"]])
        }

        @Test func aStatementCommittedWhileNoDaemonListensIsCaughtUpWhole() async throws {
            let database = try TestDatabase.create()
            let first = try await RunningListener(database: database)
            try database.execute("INSERT INTO course (short_code, name) VALUES ('FIRST', 'before')")
            _ = try await first.inbox.take(1)
            try await first.stop()

            try database.execute("INSERT INTO course (short_code, name) SELECT 'B' || g, 'while down' FROM generate_series(1, 1000) AS g")
            let second = try await RunningListener(database: database)
            let events = try await second.inbox.take(1000, within: 20)
            #expect(events.map { $0.new?["short_code"]?.stringValue } == (1...1000).map { "B\($0)" })
            try database.execute("UPDATE course SET name = 'live' WHERE short_code LIKE 'B%' AND short_code < 'B2'")
            let live = try await second.inbox.take(112, within: 20)
            #expect(live.allSatisfy { $0.operation == .update && $0.old?["name"] == .string("while down") })
            try await second.stop()
        }

        /// A statement on an inheritance parent reaches its children's rows, which its
        /// transition table would name as the parent's: such tables publish row by row.
        @Test func aTableThatGainsAnInheritanceChildSwitchesToOneTriggerPerRow() async throws {
            let database = try TestDatabase.create()
            try database.execute("CREATE TABLE animal (id int PRIMARY KEY, name text)")
            let triggers = { (table: String) throws -> [String] in
                try database.execute("""
                    SELECT tgname FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal ORDER BY tgname
                    """, parameters: [table]).rows.compactMap { $0[0] }
            }
            #expect(try triggers("animal") == ["pgherald_delete", "pgherald_insert", "pgherald_truncate", "pgherald_update"])
            try database.execute("CREATE TABLE dog (good boolean) INHERITS (animal)")
            #expect(try triggers("animal") == ["pgherald_row", "pgherald_truncate"])
            #expect(try triggers("dog") == ["pgherald_row", "pgherald_truncate"])

            let daemon = try await RunningListener(database: database)
            try database.execute("INSERT INTO animal VALUES (1, 'cat')")
            try database.execute("INSERT INTO dog VALUES (2, 'rex', true), (3, 'fido', true)")
            try database.execute("UPDATE animal SET name = upper(name)")
            let events = try await daemon.inbox.take(6)
            #expect(events.map { "\($0.operation) \($0.table.name)" } == [
                "INSERT animal", "INSERT dog", "INSERT dog", "UPDATE animal", "UPDATE dog", "UPDATE dog",
            ])
            try await Task.sleep(for: .milliseconds(300))
            #expect(daemon.inbox.count == 0, "each row once")
            try await daemon.stop()
        }

        @Test func serveRefusesAnOlderPublisherAndSaysHowToUpgrade() async throws {
            let database = try TestDatabase.create()
            try database.execute("CREATE OR REPLACE FUNCTION pgherald.version() RETURNS int LANGUAGE sql IMMUTABLE AS $$ SELECT 5 $$")
            let refused = try await DaemonProcess(["serve", "--db", database.connInfo, "--socket", SocketDaemon.temporarySocketPath()]).finish()
            #expect(refused.status != 0)
            #expect(refused.stderr.contains("publisher in this database is version 5"), "\(refused.stderr)")
            #expect(refused.stderr.contains("run pgherald install --db"), "\(refused.stderr)")
            let upgraded = try await DaemonProcess(["install", "--db", database.connInfo]).finish()
            #expect(upgraded.status == 0, "\(upgraded.stderr)")
            _ = try await SocketDaemon(database: database)
        }
    }
}
