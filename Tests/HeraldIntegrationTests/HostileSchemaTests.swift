import Foundation
import Herald
import HeraldClient
import Synchronization
import Testing

extension IntegrationTests {
    /// Tables and values that are hard to name, quote or encode: every write
    /// succeeds, and every event is valid JSON with the values as documented.
    @Suite
    struct HostileSchemaTests {
        static let weirdSchema = #"we"ird schema"#
        static let weirdTable = #"tab,le.with "quotes" and spaces"#
        static let longName = String(repeating: "abcdefghij", count: 6) + "123"

        static let schema = """
            CREATE SCHEMA "we""ird schema";
            CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
            CREATE TYPE pair AS (a int, b text);
            CREATE DOMAIN posint AS int CHECK (VALUE > 0);
            CREATE TABLE "we""ird schema"."tab,le.with ""quotes"" and spaces" (id serial PRIMARY KEY, "col.with,dots" text, "select" int);
            CREATE TABLE nopk (a int, b text);
            CREATE TABLE types (
                id serial PRIMARY KEY, n40 numeric, fnan float8, finf float4, ninf numeric, b bytea, arr int[], arr2 text[][],
                r int4range, tr tstzrange, j json, jb jsonb, c pair, m mood, d posint, ts timestamp, tstz timestamptz,
                iv interval, t text, u uuid);
            CREATE TABLE parted (id int, region text, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
            CREATE TABLE parted_eu PARTITION OF parted FOR VALUES IN ('eu');
            CREATE TABLE parent (id int PRIMARY KEY, name text);
            CREATE TABLE child (extra text) INHERITS (parent);
            CREATE TABLE "\(longName)" (id int PRIMARY KEY);
            CREATE TABLE "ünïcødé 表" (id int PRIMARY KEY, "列" text);
            """

        /// Each write, and the events it makes.
        static let writes: [(sql: String, events: Int)] = [
            (#"INSERT INTO "we""ird schema"."tab,le.with ""quotes"" and spaces" ("col.with,dots", "select") VALUES ('v', 1)"#, 1),
            ("INSERT INTO nopk VALUES (1, 'a'), (2, 'b')", 2),
            ("UPDATE nopk SET b = 'c' WHERE a = 1", 1),
            ("DELETE FROM nopk WHERE a = 2", 1),
            (#"""
                INSERT INTO types (n40, fnan, finf, ninf, b, arr, arr2, r, tr, j, jb, c, m, d, ts, tstz, iv, t, u) VALUES (
                    1234567890123456789012345678901234567890.123, 'NaN', '-Infinity', 'Infinity', '\x00ff10',
                    ARRAY[[1,NULL],[3,4]], ARRAY[['a',NULL],['"q"','\\']], '[1,5)', '[2020-01-01,infinity)',
                    '{"a":1,"a":2, "": null, "\u0000x": "\n\r"}', '{"k\"ey": [1, {"n": null}], "": 2}', ROW(1,'x,y'), 'happy', 5,
                    '2020-01-01 10:00:00.123456', '2020-01-01 10:00:00+05', '1 year 2 mons -3 days 04:05:06.7',
                    repeat('long ', 400000), '00000000-0000-0000-0000-000000000001')
                """#, 1),
            (#"INSERT INTO types (id, j) VALUES (100, '{"\u0000": "\u0000"}')"#, 1),
            ("INSERT INTO parted VALUES (1, 'eu')", 1),
            ("INSERT INTO child VALUES (2, 'c', 'x')", 1),
            (#"INSERT INTO "\#(longName)" VALUES (1)"#, 1),
            (#"INSERT INTO "ünïcødé 表" VALUES (1, E'ü\r\n\t')"#, 1),
            ("ALTER TABLE parent RENAME TO parent_renamed", 0),
            ("INSERT INTO parent_renamed VALUES (5, 'after rename')", 1),
            ("ALTER TABLE parent_renamed DROP COLUMN name", 0),
            ("INSERT INTO parent_renamed VALUES (6)", 1),
        ]

        @Test func everyWriteSucceedsAndEveryEventIsValidJSON() async throws {
            let database = try TestDatabase.create(enrolment: false, install: false)
            try database.execute(Self.schema)
            let install = try await DaemonProcess(["install", "--db", database.connInfo, "--schema", "public", "--schema", Self.weirdSchema]).finish()
            #expect(install.status == 0, "\(install.stderr)")
            let daemon = try await SocketDaemon(database: database)
            let expected = Self.writes.map(\.events).reduce(0, +)
            let all = EventCollector(daemon.client)
            let weird = EventCollector(daemon.client, try FilterQuery.parse([
                ("table", "\"we\"\"ird schema\".\"tab,le.with \"\"quotes\"\" and spaces\""), ("where", "\"col.with,dots\".eq.v"),
            ]))
            try await Task.sleep(for: .milliseconds(500))
            for write in Self.writes {
                try database.execute(write.sql)
            }
            let events = try await all.wait(for: expected)
            try await Task.sleep(for: .milliseconds(300))
            #expect(all.events.count == expected)
            for event in events {
                let parsed = try? JSONSerialization.jsonObject(with: Data(event.jsonText.utf8))
                #expect(parsed is [String: Any], "not valid JSON: \(event.jsonText.prefix(300))")
            }
            let matched = try await weird.wait(for: 1)
            #expect(matched.map(\.table) == [TableName(schema: Self.weirdSchema, name: Self.weirdTable)])
            #expect(matched.first?.new?["col.with,dots"] == .string("v"))

            let types = try #require(events.first { $0.table.name == "types" }?.new)
            #expect(numberText(types["n40"]) == "1234567890123456789012345678901234567890.123")
            #expect(types["fnan"] == .string("NaN") && types["finf"] == .string("-Infinity") && types["ninf"] == .string("Infinity"))
            #expect(types["b"] == .string("\\x00ff10"))
            #expect(types["t"]?.stringValue?.utf8.count == 2_000_000)
            #expect(types["j"]?.objectValue?["\u{0}x"] == .string("\n\r"))
            #expect(types["iv"] == .string("1 year 2 mons -3 days +04:05:06.7"))
            // Rows of a partition publish under the partitioned table, and name their partition.
            #expect(events.contains { $0.table.name == "parted" && $0.partition?.name == "parted_eu" } && !events.contains { $0.table.name == "parted_eu" })
            #expect(events.contains { $0.table.name == "child" && $0.new?["extra"] == .string("x") })
            #expect(events.contains { $0.table.name == Self.longName })
            #expect(events.contains { $0.table.name == "ünïcødé 表" && $0.new?["列"] == .string("ü\r\n\t") })
            let renamed = events.filter { $0.table.name == "parent_renamed" }
            #expect(renamed.map { $0.new?.keys.sorted() ?? [] } == [["id", "name"], ["id"]])

            // A schema created after the install is watched once install names it, and its later tables with it.
            try database.execute("CREATE SCHEMA later; CREATE TABLE later.first (id int PRIMARY KEY)")
            let again = try await DaemonProcess(["install", "--db", database.connInfo, "--schema", "public", "--schema", Self.weirdSchema, "--schema", "later"]).finish()
            #expect(again.status == 0, "\(again.stderr)")
            try database.execute("CREATE TABLE later.second (id int PRIMARY KEY); INSERT INTO later.first VALUES (1); INSERT INTO later.second VALUES (2)")
            let later = try await all.wait(for: expected + 2).suffix(2)
            #expect(later.map(\.table) == [TableName(schema: "later", name: "first"), TableName(schema: "later", name: "second")])
        }

        @Test func aTableOf1600ColumnsStreamsWhole() async throws {
            let database = try TestDatabase.create(enrolment: false)
            let columns = (1...1600).map { "c\($0) int" }.joined(separator: ", ")
            try database.execute("CREATE TABLE wide (\(columns))")
            try database.execute("SELECT pgherald.attach_all()")
            let daemon = try await SocketDaemon(database: database)
            let events = EventCollector(daemon.client)
            try await Task.sleep(for: .milliseconds(500))
            try database.execute("INSERT INTO wide (c1, c1600) VALUES (1, 1600)")
            let wide = try #require(try await events.wait(for: 1).first?.new)
            #expect(wide.count == 1600 && numberText(wide["c1600"]) == "1600")
        }

        func numberText(_ value: JSONValue?) -> String? {
            guard case .number(let number) = value else { return nil }
            return number.description
        }
    }
}
