import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// Statements that change many rows publish once per statement (publisher
    /// version 6), and every row still arrives as its own event.
    @Suite
    struct BulkStatementTests {
        /// 10 rows take the static path for a few rows, 250 the dynamic one.
        @Test(arguments: [Durability.durable, .notifyOnly], [10, 250])
        func manyRowStatementsArriveWholeInOrderWithOldRows(_ durability: Durability, _ rows: Int) async throws {
            let database = try TestDatabase.create(durability: durability)
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
            try await Task.sleep(for: .milliseconds(300))
            #expect(daemon.inbox.count == 0, "nothing twice")
            try await daemon.stop()
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
