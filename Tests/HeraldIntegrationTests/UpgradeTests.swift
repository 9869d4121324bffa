import Foundation
import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// Installing this version over any earlier one keeps every undelivered
    /// journal event, every webhook delivery state and every setting, on every
    /// supported major. The earlier versions are the install scripts this
    /// repository shipped (Fixtures/earlier-installs); `sql/install.sql` is the
    /// upgrade from each of them.
    @Suite(.enabled(if: !TestCluster.matrix.isEmpty, "needs PGHERALD_TEST_MATRIX (scripts/test)"))
    struct UpgradeTests {
        static let earlierVersions = Array(1...11)

        /// An install script older than the publisher installed would take back
        /// what the newer one changed: it is refused before it changes anything.
        @Test(arguments: TestCluster.matrix)
        func anOlderScriptOverANewerPublisherIsRefused(_ cluster: TestCluster) throws {
            let database = try TestDatabase.create(on: cluster)
            let admin = try database.connect()
            let current = try #require(try Journal.publisherVersion(on: admin))
            let channel = try Journal.notificationChannel(on: admin)
            try admin.execute("CREATE OR REPLACE FUNCTION pgherald.version() RETURNS int LANGUAGE sql IMMUTABLE AS $$ SELECT \(current + 1) $$")
            let refusal = #expect(throws: LibpqError.self) { try Installer.install(on: admin) }
            #expect(refusal?.message.contains(
                "pgherald publisher version \(current + 1) is installed, newer than this install script (version \(current))"
            ) == true, "\(refusal.map { "\($0)" } ?? "no error")")
            #expect(try Journal.publisherVersion(on: admin) == current + 1)
            #expect(try Journal.notificationChannel(on: admin) == channel)
        }

        @Test(arguments: TestCluster.matrix, earlierVersions)
        func anEarlierInstallUpgradesInPlaceAndKeepsEverything(_ cluster: TestCluster, _ version: Int) async throws {
            let database = try TestDatabase.create(install: false, on: cluster)
            let admin = try database.connect()
            let script = try String(contentsOf: TestDatabase.repositoryRoot.appending(
                path: "Tests/HeraldIntegrationTests/Fixtures/earlier-installs/install-v\(version).sql"), encoding: .utf8)
            try admin.inTransaction { () throws(LibpqError) in try admin.execute(script) }
            #expect(try Journal.publisherVersion(on: admin) == version)
            let hasJournal = try exists("pgherald.journal", on: admin)
            try admin.execute("SELECT pgherald.exclude('enrols_in'::regclass)")
            if hasJournal {
                // A daemon that stopped here: its checkpoint comes before the writes below.
                try admin.execute("INSERT INTO pgherald.checkpoint (daemon, snapshot) VALUES ('default', pg_current_snapshot())")
            }
            try admin.execute("""
                INSERT INTO course (short_code, name) VALUES ('OLD1', 'Before the upgrade');
                INSERT INTO course (short_code, name) SELECT 'OLDB' || g, 'Bulk ' || g FROM generate_series(1, 80) AS g;
                UPDATE course SET name = 'Renamed before' WHERE short_code = 'OLD1';
                DELETE FROM course WHERE short_code = 'OLDB80'
                """)
            if try exists("pgherald.webhook_delivery", on: admin) {
                try admin.execute("""
                    INSERT INTO pgherald.webhook_feed (endpoint, snapshot) VALUES ('orders', pg_current_snapshot());
                    INSERT INTO pgherald.webhook_delivery (endpoint, event_id, body, attempts, last_status, last_error)
                         VALUES ('orders', 1, '{"waiting":true}', 3, 503, 'unavailable');
                    INSERT INTO pgherald.webhook_dead_letter (endpoint, event_id, body, created_at, attempts, error)
                         VALUES ('orders', 2, '{"dead":true}', now(), 8, 'gave up');
                    """)
            }
            let before = try contents(on: admin)
            #expect(!before.isEmpty)

            try Installer.install(on: admin)

            #expect(try Journal.publisherVersion(on: admin) == Journal.requiredPublisherVersion)
            let after = try contents(on: admin, columnsOf: before)
            for (table, kept) in before {
                if table == "setting" {
                    // The upgrade adds settings of its own (the channel, the triggers) and keeps the
                    // rest; `native` is what the install found, not a choice, and is found again.
                    let choices = Set(kept.rows.filter { !$0.contains(#""name":"native""#) })
                    #expect(choices.isSubset(of: after[table]?.rows ?? []), "a setting changed in the upgrade from version \(version)")
                } else {
                    #expect(after[table] == kept, "pgherald.\(table) changed across the upgrade from version \(version)")
                }
            }
            #expect(try Journal.notificationChannel(on: admin) != nil)
            let excluded = try admin.execute("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'enrols_in'::regclass AND tgname LIKE 'pgherald%'")
            #expect(excluded.rows == [["0"]], "the exclusion is kept")

            // The events written before the upgrade reach a daemon that starts after it, then new ones.
            let expected = hasJournal ? 83 : 0
            let daemon = try await RunningListener(database: database)
            let caughtUp = try await daemon.inbox.take(expected)
            #expect(Set(caughtUp.map(\.id)).count == expected)
            #expect(caughtUp.first?.new?["short_code"] == (hasJournal ? .string("OLD1") : nil))
            try admin.execute("INSERT INTO course (short_code, name) VALUES ('NEW1', 'After the upgrade')")
            let fresh = try await daemon.inbox.take(1)
            #expect(fresh.first?.new?["short_code"] == .string("NEW1"))
            try await daemon.stop()
        }

        private func exists(_ table: String, on connection: LibpqConnection) throws -> Bool {
            try connection.execute("SELECT to_regclass($1) IS NOT NULL", parameters: [table]).rows == [["t"]]
        }

        /// Every row of every table of the pgherald schema, by table, sorted; with
        /// `columnsOf`, only the tables and columns those contents had, so that
        /// columns an upgrade adds do not count as a change.
        private func contents(on connection: LibpqConnection, columnsOf earlier: [String: Table]? = nil) throws -> [String: Table] {
            let tables = try connection.execute("""
                SELECT c.relname, string_agg(a.attname, chr(31) ORDER BY a.attnum)
                  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                 WHERE c.relnamespace = 'pgherald'::regnamespace AND c.relkind IN ('r', 'v')
                 GROUP BY c.relname
                """).rows
            var contents: [String: Table] = [:]
            for table in tables {
                let name = table[0] ?? ""
                var columns = (table[1] ?? "").split(separator: "\u{1F}").map(String.init)
                if let earlier {
                    guard let kept = earlier[name] else { continue }
                    columns = kept.columns
                }
                let list = try columns.map { try connection.escapeIdentifier($0) }.joined(separator: ", ")
                let rows = try connection.execute("""
                    SELECT row_to_json(r)::text FROM (SELECT \(list) FROM pgherald.\(try connection.escapeIdentifier(name))) AS r ORDER BY 1
                    """).rows.map { $0[0] ?? "" }
                contents[name] = Table(columns: columns, rows: rows)
            }
            return contents
        }

        struct Table: Equatable {
            var columns: [String]
            var rows: [String]
        }
    }
}
