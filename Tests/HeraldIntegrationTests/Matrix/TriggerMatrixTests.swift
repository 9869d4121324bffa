import Foundation
import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// The triggers, the journal, catch-up and bulk statements on every
    /// supported major, with both kinds of trigger and both durabilities
    /// (scripts/test starts a cluster of each major and prints what passed).
    @Suite(.enabled(if: !TriggerCell.all.isEmpty, "needs PGHERALD_TEST_MATRIX (scripts/test)"))
    struct TriggerMatrixTests {
        @Test(arguments: TriggerCell.all)
        func everyCorpusCasePublishesExactly(_ cell: TriggerCell) throws {
            let major = cell.cluster.major
            let run = try CorpusRun(cell, shapes: TriggerCorpus.shapes(major: major))
            let cases = TriggerCorpus.cases(major: major)
            var passed = 0
            for item in cases {
                let problems = try run.check(item)
                if problems.isEmpty { passed += 1 }
                for problem in problems { Issue.record("\(item.name): \(problem)") }
            }
            cell.report("corpus", passed: passed, total: cases.count)
        }

        @Test(arguments: TriggerCell.all)
        func randomTablesAndStatementsPublishExactly(_ cell: TriggerCell) throws {
            let run = try CorpusRun(cell, shapes: "")
            let seed = UInt64.random(in: 0...UInt64.max)
            var generator = RandomTables(seed: seed, major: cell.cluster.major)
            var passed = 0
            var total = 0
            for table in 0..<4 {
                for item in generator.table(named: "random_\(table)") {
                    total += 1
                    let problems = try run.check(item)
                    if problems.isEmpty { passed += 1 }
                    for problem in problems { Issue.record("seed \(seed), \(item.name): \(problem)\n\(item.sql)") }
                }
            }
            cell.report("random tables", passed: passed, total: total)
        }

        /// Live events, and in durable mode what was committed while no daemon
        /// listened, single rows and a bulk statement, arrive once each.
        @Test(arguments: TriggerCell.all)
        func eventsArriveLiveAndAfterAGap(_ cell: TriggerCell) async throws {
            let database = try TestDatabase.create(install: false, on: cell.cluster)
            let writer = try database.connect()
            try Installer.install(on: writer, durability: cell.durability, triggers: cell.triggers)
            let first = try await RunningListener(database: database)
            try writer.execute("INSERT INTO course (short_code, name) VALUES ('LIVE', 'Live')")
            let live = try await first.inbox.take(1)
            #expect(live.first?.new?["short_code"] == .string("LIVE"))
            try await first.stop()
            guard cell.durability == .durable else {
                cell.report("delivery", passed: live.count, total: 1)
                return
            }
            try writer.execute("""
                INSERT INTO course (short_code, name) VALUES ('GAP', 'During the gap');
                INSERT INTO course (short_code, name) SELECT 'B' || g, 'Bulk ' || g FROM generate_series(1, 150) AS g;
                UPDATE course SET name = 'Renamed' WHERE short_code = 'GAP'
                """)
            let second = try await RunningListener(database: database)
            let caughtUp = try await second.inbox.take(152)
            #expect(caughtUp.first?.new?["short_code"] == .string("GAP"))
            #expect(Set(caughtUp.map(\.id)).count == 152)
            #expect(caughtUp.last?.operation == .update)
            try await second.stop()
            cell.report("delivery", passed: live.count + (Set(caughtUp.map(\.id)).count == 152 ? 1 : 0), total: 2)
        }
    }
}
