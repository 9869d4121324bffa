import Foundation
import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// The native library (`native/`) publishes durable statements of any
    /// size and notify-only single-row statements in C, and hands every
    /// other statement to plpgsql. Users must not be able to tell which ran:
    /// the same events and journal rows, byte for byte, and the same refusals.
    @Suite(.enabled(if: TestDatabase.hasNativeTriggers, "needs the native triggers (scripts/test installs them as root)"))
    struct NativeTriggerTests {
        /// What one kind of trigger published for the same statements, with
        /// `txid` and `at` blanked; `times` are the `at`s as written.
        struct Published {
            var notifications: [String]
            var journal: [String]
            var times: [String]
        }

        /// Every case the C path handles itself: single rows (keys of one,
        /// two and no columns, a key read around \u0000, rows too large to
        /// notify, a key too large for an omitted event) and, durable,
        /// statements of several rows (values whose text holds `,`, `}` and
        /// `"`, an UPDATE's pairs, a statement in two journal rows, rows
        /// split by size, transition tables spilled to disk). Notify-only
        /// hands statements of several rows to plpgsql. Both modes, every major.
        @Test(arguments: TestCluster.matrix, [Durability.durable, .notifyOnly])
        func eventsAreThePlpgsqlTriggersByteForByte(_ cluster: TestCluster, _ durability: Durability) throws {
            let native = try publish(durability, with: .native, on: cluster)
            let plpgsql = try publish(durability, with: .plpgsql, on: cluster)
            #expect(native.notifications.count == (durability == .durable ? 23 : 47))
            #expect(native.journal.count == (durability == .durable ? 32 : 0))
            #expect(native.notifications == plpgsql.notifications)
            #expect(native.journal == plpgsql.journal)
            #expect(native.notifications.contains { $0.contains(#""omitted":true"#) } == (durability == .notifyOnly))
            #expect(native.notifications.contains { $0.hasPrefix(#"{"ref":"#) } == (durability == .durable))
            // `at` is when the trigger ran, in UTC, as to_char writes it.
            let events = durability == .durable ? 28 : 621  // a reference carries no `at`
            #expect(native.times.count == events && native.times.allSatisfy { $0.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z/) != nil })
            let recent = try TestDatabase.create(enrolment: false, install: false, on: cluster).execute("""
                SELECT count(*) FROM unnest($1::text[]) AS t
                 WHERE to_char(t::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') = t
                   AND t::timestamptz BETWEEN now() - interval '10 minutes' AND now()
                """, parameters: ["{\(native.times.joined(separator: ","))}"])
            #expect(recent.rows == [["\(events)"]])
        }

        /// Both kinds publish for a writer that has only its table's
        /// privileges: the C path writes the journal as pgherald's own, and
        /// the plpgsql functions it hands other statements to run as their owner.
        @Test(arguments: [Installer.Triggers.native, .plpgsql])
        func aWriterWithOnlyItsTablesPrivilegesPublishes(_ triggers: Installer.Triggers) throws {
            let database = try TestDatabase.create(enrolment: false, install: false)
            let admin = try database.connect()
            try Installer.install(on: admin, triggers: triggers)
            let role = "writer_\(UInt32.random(in: 0...UInt32.max))"
            try admin.execute("""
                CREATE TABLE note (id int PRIMARY KEY, body text);
                CREATE ROLE \(role);
                GRANT ALL ON note TO \(role);
                """)
            let writer = try database.connect()
            try writer.execute("SET ROLE \(role)")
            try writer.execute("INSERT INTO note VALUES (1, 'one')")
            try writer.execute("INSERT INTO note VALUES (2, 'two'), (3, 'three')")
            try writer.execute("UPDATE note SET body = 'x' WHERE id = 1")
            try writer.execute("DELETE FROM note")
            let journal = try admin.execute("SELECT count(*), sum(coalesce(event_count, 1)) FROM pgherald.journal")
            #expect(journal.rows == [["4", "7"]])
            #expect(try Installer.usesNativeTriggers(on: admin) == (triggers == .native))
        }

        /// `--triggers` picks the functions and an upgrade keeps the choice.
        @Test func installChoosesTheTriggersAndKeepsTheChoice() async throws {
            let database = try TestDatabase.create(install: false)
            func installed(_ arguments: [String] = []) async throws -> (stdout: String, function: String) {
                let run = try await DaemonProcess(["install", "--db", database.connInfo] + arguments).finish()
                #expect(run.status == 0, "\(run.stderr)")
                let trigger = try database.execute("""
                    SELECT p.proname FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
                     WHERE t.tgrelid = 'course'::regclass AND t.tgname = 'pgherald_insert'
                    """)
                return (run.stdout, trigger.rows.first?[0] ?? "")
            }
            let first = try await installed()
            #expect(first.stdout.contains("installed, durable, native triggers"))
            #expect(first.function == "publish_statement_durable_native")
            let plpgsql = try await installed(["--triggers", "plpgsql"])
            #expect(plpgsql.stdout.contains("installed, durable, plpgsql triggers"))
            #expect(plpgsql.function == "publish_statement_durable")
            let native = try database.execute("SELECT to_regprocedure('pgherald.publish_statement_durable_native()') IS NULL")
            #expect(native.rows == [["t"]], "the library's functions go when no trigger uses them")
            let upgrade = try await installed()
            #expect(upgrade.function == "publish_statement_durable", "an upgrade keeps the choice")
            let back = try await installed(["--triggers", "native", "--durability", "notify-only"])
            #expect(back.stdout.contains("installed, notify-only, native triggers"))
            #expect(back.function == "publish_statement_native")
            let unknown = try await DaemonProcess(["install", "--db", database.connInfo, "--triggers", "fast"]).finish()
            #expect(unknown.status != 0)
            #expect(unknown.stderr.contains("auto|native|plpgsql") || unknown.stderr.contains("'auto', 'native', 'plpgsql'"), "\(unknown.stderr)")
        }

        /// Creating a C function needs a superuser: an installer without one
        /// gets plpgsql under `auto` and a refusal that says why under `native`.
        @Test func anInstallWithoutASuperuserRunsPlpgsql() async throws {
            let database = try TestDatabase.create(enrolment: false, install: false)
            let role = "owner_\(UInt32.random(in: 0...UInt32.max))"
            try database.execute("CREATE ROLE \(role) LOGIN NOSUPERUSER; ALTER DATABASE \(database.name) OWNER TO \(role)")
            let asOwner = "\(database.connInfo) user=\(role)"
            try LibpqConnection.connect(ConnectionString(asOwner)).execute("CREATE SCHEMA app; CREATE TABLE app.note (id int PRIMARY KEY)")

            let native = try await DaemonProcess(["install", "--db", asOwner, "--schema", "app", "--triggers", "native"]).finish()
            #expect(native.status != 0)
            #expect(native.stderr.contains("native triggers were asked for, but permission denied for language c"), "\(native.stderr)")
            let auto = try await DaemonProcess(["install", "--db", asOwner, "--schema", "app"]).finish()
            #expect(auto.status == 0, "\(auto.stderr)")
            #expect(auto.stdout.contains("installed, durable, plpgsql triggers"), "\(auto.stdout)")
            try database.execute("INSERT INTO app.note VALUES (1)")
            let journal = try database.execute("SELECT count(*) FROM pgherald.journal")
            #expect(journal.rows == [["1"]])
        }

        /// Runs the same statements in a database of their own with one kind
        /// of trigger, and returns what they published with `txid` and `at`,
        /// which differ between runs, blanked.
        private func publish(_ durability: Durability, with triggers: Installer.Triggers, on cluster: TestCluster) throws -> Published {
            let database = try TestDatabase.create(enrolment: false, install: false, on: cluster)
            try database.execute(#"""
                CREATE TYPE pair AS (a int, b text);
                CREATE TABLE typed (gone int, n numeric, j json, jb jsonb, c pair, at timestamptz,
                                    "we""ird,näme" text, t text, id bigint, PRIMARY KEY (t, id));
                ALTER TABLE typed DROP COLUMN gone;
                CREATE TABLE "Wéird ""table""" (id int PRIMARY KEY, v text);
                CREATE TABLE unkeyed (v text);
                CREATE TABLE bare ();
                CREATE TABLE document (id int PRIMARY KEY, body text);
                CREATE TABLE long_key (k text PRIMARY KEY, v text);
                """#)
            let writer = try database.connect()
            let installed = try Installer.install(on: writer, durability: durability, triggers: triggers)
            #expect(installed.count == 6)
            #expect(try Installer.usesNativeTriggers(on: writer) == (triggers == .native))
            try writer.execute("LISTEN \(try writer.escapeIdentifier(try #require(try Journal.notificationChannel(on: writer))))")
            // A parked daemon's doorbell, as pgherald.park() sets it: durable triggers notify only then.
            try writer.execute("SELECT setval('pgherald.doorbell', 1)")
            for statement in [
                #"INSERT INTO typed VALUES (1.5, '{"a": 1}', '{"b": [1, null]}', ROW(1, 'x,y'), '2020-01-01 10:00+05', 'é', E'q"\\', 1)"#,
                // \u0000 in a json column: the key is read around it, in both kinds.
                #"INSERT INTO typed VALUES ('NaN', '{"z": "\u0000"}', NULL, NULL, NULL, NULL, E'\\u0000', 2)"#,
                "UPDATE typed SET n = 2 WHERE id = 1",
                "UPDATE typed SET id = 3 WHERE id = 2",
                "DELETE FROM typed WHERE id = 3",
                #"INSERT INTO "Wéird ""table""" VALUES (1, 'a') ON CONFLICT (id) DO UPDATE SET v = 'b'"#,
                #"INSERT INTO "Wéird ""table""" VALUES (1, 'a') ON CONFLICT (id) DO UPDATE SET v = 'b'"#,
                "INSERT INTO unkeyed VALUES ('u')",
                "INSERT INTO bare DEFAULT VALUES",
                "INSERT INTO document VALUES (1, repeat('d', 10000))",
                "UPDATE document SET body = 'small' WHERE id = 1",
                "INSERT INTO long_key VALUES (repeat('k', 7200), 'v')",
                // Several rows: in C when durable, by plpgsql when notify-only.
                "INSERT INTO unkeyed VALUES ('a'), ('b')",
                "UPDATE unkeyed SET v = 'none' WHERE false",
                "BEGIN; INSERT INTO document VALUES (2, 'x'); DELETE FROM document WHERE id = 2; COMMIT",
                "DELETE FROM unkeyed",
                #"""
                INSERT INTO typed SELECT i, '{"k": [1, {"x": "a,}"}], "y": "]"}', '{"b": ["}", 2]}', ROW(i, 'p,"q}')::pair,
                                         '2020-01-01 10:00+00', E'r\\u0000s', CASE WHEN i % 2 = 0 THEN E'a\\u0000' ELSE 'm,}' END, i
                  FROM generate_series(10, 14) AS i
                """#,
                "UPDATE typed SET n = n + 1, \"we\"\"ird,näme\" = 'u' WHERE id >= 10",
                "DELETE FROM typed WHERE id >= 13",
                // Two journal rows: a reference with `through`.
                "INSERT INTO document SELECT i, 'row ' || i FROM generate_series(100, 249) AS i",
                "UPDATE document SET body = body || '!' WHERE id BETWEEN 100 AND 249",
                // Transition tables on disk, and journal rows of about 1 MB split by size.
                "SET work_mem = '64kB'",
                "INSERT INTO document SELECT i, repeat(md5(i::text), 1250) FROM generate_series(300, 369) AS i",
                "DELETE FROM document WHERE id >= 100",
                "RESET work_mem",
            ] {
                try writer.execute(statement)
            }
            var notifications: [String] = []
            writer.takeNotifications { _, payload, _ in notifications.append(String(decoding: payload, as: UTF8.self)) }
            let journal = try writer.execute("SELECT concat_ws(' ', id, last_id, event_count, event) FROM pgherald.journal ORDER BY id")
            let mismatched = try writer.execute(#"""
                SELECT count(*) FROM pgherald.journal
                 WHERE last_id IS NULL AND replace(event, '\u0000', '\ufffd')::json ->> 'txid' <> txid::text
                """#)
            #expect(mismatched.rows == [["0"]], "a single event's txid is its journal row's")
            let blanked = { (text: String) in
                text.replacing(/"txid":"\d+"/, with: #""txid":"""#).replacing(/"at":"[^"]+"/, with: #""at":"""#)
            }
            let times = notifications.flatMap { $0.split(separator: "\u{1E}") }.compactMap { $0.firstMatch(of: /"at":"([^"]+)"\}$/)?.1 }
            return Published(notifications: notifications.map(blanked), journal: journal.rows.map { blanked($0[0] ?? "") },
                             times: times.map(String.init))
        }
    }
}
