import Foundation
import Herald
@testable import HeraldPostgres
import Testing

extension IntegrationTests {
    /// The journal queries that catch-up and resumes page through.
    @Suite
    struct JournalQueryTests {
        /// A stop that interrupts the wait for DEALLOCATE ALL (the listener
        /// replans every 2 s) leaves the server to run it all the same: the
        /// final checkpoint's sweep must prepare its statement again, and
        /// failed with "prepared statement … does not exist" (BoundedStopTests).
        @Test func aStopWhileForgettingPreparedStatementsLeavesNoneCounted() throws {
            let database = try TestDatabase.create()
            let wake = WakeSignal()
            let connection = try LibpqConnection.connect(ConnectionString(database.connInfo), timeout: .seconds(10), applicationName: "pgherald-test", wake: wake)
            try connection.execute(prepared: "pgherald_test_one", "SELECT 1", parameters: [])
            wake.signal()
            // Woken before the answer comes, as a stop is.
            _ = try? connection.forgetPreparedStatements()
            connection.ignoreWakeSignal()
            try connection.discardInterruptedQuery(until: .now + .seconds(5))
            #expect(try connection.execute(prepared: "pgherald_test_one", "SELECT 1", parameters: []).rows == [["1"]])
        }

        @Test func pagesFollowTransactionIDsAsNumbersAcrossADigitBoundary() throws {
            let database = try TestDatabase.create()
            let connection = try database.connect()
            // Transaction ids from 995 to 1004: as text, "1000" sorts before "995".
            for (index, txid) in (995...1004).enumerated() {
                try connection.execute(
                    "INSERT INTO pgherald.journal_1 (id, txid, event) VALUES ($1, $2::xid8, '{}')",
                    parameters: [String(index + 1), String(txid)]
                )
            }
            let older = try #require(TransactionSnapshot("990:990:"))
            let newer = try #require(TransactionSnapshot("2000:2000:"))
            var after: (transactionID: UInt64, id: UInt64)?
            var seen: [UInt64] = []
            while true {
                let page = try Journal.events(visibleIn: newer, notVisibleIn: older, after: after, limit: 3, on: connection)
                seen += page.rows.map(\.transactionID)
                guard let last = page.rows.last, !page.isLast else { break }
                after = (last.transactionID, last.id)
            }
            #expect(seen == Array(995...1004))
        }

        /// A statement's events share journal rows of up to 100; readers take them apart.
        @Test func batchesAreTakenApartAndAPositionInsideOneIsKept() throws {
            let database = try TestDatabase.create()
            let connection = try database.connect()
            let event = { (id: Int, txid: Int) in
                #"{"id":"\#(id)","op":"INSERT","schema":"public","table":"t","pk":null,"new":{"n":\#(id)},"old":null,"txid":"\#(txid)","at":"2026-11-23T00:00:00.000000Z"}"#
            }
            try connection.execute("INSERT INTO pgherald.journal_1 (id, txid, event) VALUES (1, '10', $1)", parameters: [event(1, 10)])
            try connection.execute(
                "INSERT INTO pgherald.journal_1 (id, last_id, txid, event) VALUES (2, 5, '11', $1)",
                parameters: [(2...5).map { event($0, 11) }.joined(separator: "\u{1E}")]
            )
            try connection.execute("INSERT INTO pgherald.journal_1 (id, txid, event) VALUES (6, '12', $1)", parameters: [event(6, 12)])
            let older = try #require(TransactionSnapshot("5:5:"))
            let newer = try #require(TransactionSnapshot("20:20:"))

            let all = try Journal.events(visibleIn: newer, notVisibleIn: older, limit: 10, on: connection)
            #expect(all.rows.map(\.id) == [1, 2, 3, 4, 5, 6])
            #expect(all.rows.map(\.transactionID) == [10, 11, 11, 11, 11, 12])
            #expect(all.isLast)
            #expect(all.rows.allSatisfy { (try? Event(payload: $0.event))?.id == String($0.id) })

            // A reader that stopped after event 3 gets 4 and 5 from the same journal row next.
            let rest = try Journal.events(visibleIn: newer, notVisibleIn: older, after: (11, 3), limit: 1, on: connection)
            #expect(rest.rows.map(\.id) == [4, 5])
            #expect(!rest.isLast)

            #expect(try Journal.events(ids: [4, 6, 99], on: connection).map(\.id).sorted() == [4, 6])
            #expect(try Journal.events(transactionID: 11, from: 2, through: 5, on: connection).map(\.id) == [2, 3, 4, 5])
        }

        /// A durable plpgsql trigger keeps a single row's change in parts, so that the writer does not put its
        /// text together; the view pgherald.journal does, and every read gets the text the triggers wrote before.
        /// A statement of several rows keeps its text.
        @Test func aSingleRowChangeIsKeptInPartsAndReadAsItsEvent() throws {
            let database = try TestDatabase.create(enrolment: false, install: false)
            let connection = try database.connect()
            try connection.execute(#"CREATE TABLE "Wé ird" (id int, k text, v json, PRIMARY KEY (id, k))"#)
            try Installer.install(on: connection, durability: .durable, triggers: .plpgsql)
            try connection.execute(#"INSERT INTO "Wé ird" VALUES (1, 'a"b', '{"x": "\u0000"}')"#)
            try connection.execute(#"UPDATE "Wé ird" SET v = '[]'"#)
            try connection.execute(#"UPDATE "Wé ird" SET v = '[]' WHERE false"#)
            try connection.execute(#"DELETE FROM "Wé ird""#)
            try connection.execute(#"INSERT INTO "Wé ird" VALUES (2, 'c', NULL), (3, 'd', NULL)"#)
            let kept = try connection.execute("SELECT id, event IS NULL FROM pgherald.journal_1 ORDER BY id")
            #expect(kept.rows == [["1", "t"], ["2", "t"], ["3", "t"], ["4", "f"]])

            let blanked = { (text: Substring) in
                text.replacing(/"txid":"\d+","at":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"\}$/, with: "")
            }
            let events = try Journal.events(ids: [1, 2, 3, 4, 5], on: connection).sorted { $0.id < $1.id }
            #expect(events.map { blanked($0.event) } == [
                #"{"id":"1","op":"INSERT","schema":"public","table":"Wé ird","pk":{"id":1,"k":"a\"b"},"new":{"id":1,"k":"a\"b","v":{"x": "\u0000"}},"old":null,"#,
                #"{"id":"2","op":"UPDATE","schema":"public","table":"Wé ird","pk":{"id":1,"k":"a\"b"},"new":{"id":1,"k":"a\"b","v":[]},"old":{"id":1,"k":"a\"b","v":{"x": "\u0000"}},"#,
                #"{"id":"3","op":"DELETE","schema":"public","table":"Wé ird","pk":{"id":1,"k":"a\"b"},"new":null,"old":{"id":1,"k":"a\"b","v":[]},"#,
                #"{"id":"4","op":"INSERT","schema":"public","table":"Wé ird","pk":{"id":2,"k":"c"},"new":{"id":2,"k":"c","v":null},"old":null,"#,
                #"{"id":"5","op":"INSERT","schema":"public","table":"Wé ird","pk":{"id":3,"k":"d"},"new":{"id":3,"k":"d","v":null},"old":null,"#,
            ])
            // Its own transaction's id, as every event carries.
            let matching = try connection.execute("""
                SELECT count(*) FROM pgherald.journal_1 j JOIN pgherald.journal v USING (id)
                 WHERE j.event IS NULL AND v.event LIKE '%"txid":"' || j.txid || '","at":"%'
                """)
            #expect(matching.rows == [["3"]])
        }

        /// A range read page by page, at every page size, gives the events of a read of it all at once: each
        /// transaction placed by its last event, whole, its own events in id order; batches and transactions
        /// longer than a page included, and a page that stopped inside a batch or a transaction goes on there.
        @Test func aRangeReadsInDeliveryOrderAtEveryPageSize() throws {
            let database = try TestDatabase.create()
            let connection = try database.connect()
            let event = { (id: Int, txid: Int) in
                #"{"id":"\#(id)","op":"INSERT","schema":"public","table":"t","pk":null,"new":{"n":\#(id)},"old":null,"txid":"\#(txid)","at":"2026-11-23T00:00:00.000000Z"}"#
            }
            var random = SeededRandom(seed: UInt64.random(in: 0...UInt64(UInt32.max)))
            // Ids are handed out as transactions write, interleaved: transaction ids say only who began first.
            // The first writes come from transactions in the order they began, so that a first page holds
            // some already in delivery order, as a sweep's usually does.
            var nextID = 1
            var written: [Int: [Int]] = [:]
            let transactions = Array(100...111)
            for write in 0..<60 {
                let txid = write < 6 ? 100 + write / 2 : transactions[3 + random.next(upTo: transactions.count - 3)]
                let size = random.next(upTo: 4) == 0 ? 2 + random.next(upTo: 4) : 1
                let ids = Array(nextID..<(nextID + size))
                nextID += size
                written[txid, default: []] += ids
                if size == 1 {
                    try connection.execute("INSERT INTO pgherald.journal_1 (id, txid, event) VALUES ($1, $2::xid8, $3)",
                                           parameters: [String(ids[0]), String(txid), event(ids[0], txid)])
                } else {
                    try connection.execute("INSERT INTO pgherald.journal_1 (id, last_id, txid, event) VALUES ($1, $2, $3::xid8, $4)",
                                           parameters: [String(ids[0]), String(ids.last!), String(txid), ids.map { event($0, txid) }.joined(separator: "\u{1E}")])
                }
            }
            let expected = written.sorted { $0.value.last! < $1.value.last! }.flatMap { txid, ids in ids.map { (UInt64(txid), UInt64($0)) } }
            let older = try #require(TransactionSnapshot("90:90:"))
            let newer = try #require(TransactionSnapshot("200:200:"))

            var whole = JournalRange(older: older, newer: newer)
            let all = try whole.page(after: nil, limit: 1000, on: connection)
            #expect(all.isLast && all.rows.map { ($0.transactionID, $0.id) }.elementsEqual(expected, by: ==))
            // A byte limit cuts a page after any journal row: 1 byte after each, 400 after two or three.
            for (limit, byteLimit) in (1...8).flatMap({ limit in ([nil, 1, 400, 2_000] as [Int?]).map { (limit, $0) } }) {
                var range = JournalRange(older: older, newer: newer)
                var after: (transactionID: UInt64, id: UInt64)?
                var seen: [(UInt64, UInt64)] = []
                for _ in 0..<400 {
                    let page = try range.page(after: after, limit: limit, byteLimit: byteLimit, on: connection)
                    // A reader may stop inside a page, as a webhook feed with little room does.
                    let taken = page.isLast ? page.rows.count : max(1, page.rows.count - random.next(upTo: 2))
                    seen += page.rows.prefix(taken).map { ($0.transactionID, $0.id) }
                    if page.isLast && taken == page.rows.count { break }
                    after = seen.last.map { (transactionID: $0.0, id: $0.1) } ?? after
                }
                #expect(seen.elementsEqual(expected, by: ==), "limit \(limit), \(byteLimit.map { "\($0) bytes" } ?? "no byte limit"): \(seen.map(\.1)) against \(expected.map(\.1))")
            }
        }

        /// A replay's page is held while its client takes it: 500 journal rows of 1 MB were 500 MB.
        /// With a byte limit a page stops after the row that reaches it, and a step's rows more at most,
        /// whether it reads one long transaction, many short ones, or the range's first rows.
        @Test func aPageOfLargeRowsStopsNearItsByteLimit() throws {
            let database = try TestDatabase.create()
            let connection = try database.connect()
            let large = String(repeating: "q", count: 1 << 20)
            // Transaction 100 writes 10 small rows, then 30 large; 101 to 130 write one large row each.
            // Small rows first: a read that sized its next rows by those it had seen took all 30 large ones.
            let writes = (1...40).map { (id: $0, txid: 100, body: $0 <= 10 ? "s" : large) }
                + (41...70).map { (id: $0, txid: 100 + $0 - 40, body: large) }
            for write in writes {
                try connection.execute(
                    "INSERT INTO pgherald.journal_1 (id, txid, event) VALUES ($1, $2::xid8, $3)",
                    parameters: [String(write.id), String(write.txid),
                                 #"{"id":"\#(write.id)","op":"INSERT","schema":"public","table":"t","pk":null,"new":{"b":"\#(write.body)"},"old":null,"txid":"\#(write.txid)","at":"x"}"#]
                )
            }
            let older = try #require(TransactionSnapshot("90:90:"))
            let newer = try #require(TransactionSnapshot("200:200:"))
            let byteLimit = 4 << 20
            var range = JournalRange(older: older, newer: newer)
            var after: (transactionID: UInt64, id: UInt64)?
            var seen: [UInt64] = []
            var largest = 0
            for _ in 0..<100 {
                let page = try range.page(after: after, limit: 500, byteLimit: byteLimit, on: connection)
                let sizes = page.rows.map { $0.event.utf8.count }
                largest = max(largest, sizes.reduce(0, +))
                // Past the limit by its last row at most.
                #expect(sizes.dropLast().reduce(0, +) < byteLimit, "a page of \(sizes.count) rows held \(sizes.reduce(0, +) >> 20) MiB")
                seen += page.rows.map(\.id)
                guard let last = page.rows.last, !page.isLast else { break }
                after = (last.transactionID, last.id)
            }
            #expect(seen == Array(1...70))
            #expect(largest >= byteLimit, "pages stopped before their limit: \(largest) bytes")
        }

        /// A sweep's first page that stops inside the range's only transaction (a statement of more
        /// rows than a page) is kept as read, and the pages after it go on inside that transaction.
        @Test func aFirstPageInsideTheOnlyTransactionGoesOnToItsEnd() throws {
            let database = try TestDatabase.create()
            let connection = try database.connect()
            for id in 1...5 {
                try connection.execute(
                    "INSERT INTO pgherald.journal_1 (id, txid, event) VALUES ($1, '100', $2)",
                    parameters: [String(id), #"{"id":"\#(id)","op":"INSERT","schema":"public","table":"t","pk":null,"new":{"n":1},"old":null,"txid":"100","at":"x"}"#]
                )
            }
            let older = try #require(TransactionSnapshot("90:90:"))
            let newer = try #require(TransactionSnapshot("200:200:"))
            var range = JournalRange(older: older, newer: newer)
            var page = try range.firstPage(
                from: Journal.events(visibleIn: newer, notVisibleIn: older, limit: 2, on: connection), limit: 2, on: connection
            )
            var seen = page.rows.map(\.id)
            #expect(seen == [1, 2] && !page.isLast)
            while !page.isLast, let last = page.rows.last {
                page = try range.page(after: (last.transactionID, last.id), limit: 2, on: connection)
                seen += page.rows.map(\.id)
            }
            #expect(seen == [1, 2, 3, 4, 5])
        }

        /// Transactions pruned while a long range is read are passed over: a page is empty only at the
        /// range's end, and a position whose transaction is gone reads the range again from its start.
        @Test func aRangeReadsOnPastTransactionsPrunedMeanwhile() throws {
            let database = try TestDatabase.create()
            let connection = try database.connect()
            for (id, txid) in [(1, 10), (2, 11), (3, 12)] {
                try connection.execute("INSERT INTO pgherald.journal_1 (id, txid, event) VALUES ($1, $2::xid8, $3)",
                                       parameters: [String(id), String(txid), #"{"id":"\#(id)"}"#])
            }
            let older = try #require(TransactionSnapshot("5:5:"))
            let newer = try #require(TransactionSnapshot("20:20:"))
            var range = JournalRange(older: older, newer: newer)
            let first = try range.page(after: nil, limit: 1, on: connection)
            #expect(first.rows.map(\.id) == [1] && !first.isLast)
            try connection.execute("DELETE FROM pgherald.journal_1 WHERE txid = '11'")
            let second = try range.page(after: (10, 1), limit: 1, on: connection)
            #expect(second.rows.map(\.id) == [3] && second.isLast)

            try connection.execute("DELETE FROM pgherald.journal_1 WHERE txid = '10'")
            var fresh = JournalRange(older: older, newer: newer)
            try fresh.listTransactions(on: connection)
            let again = try fresh.page(after: (10, 1), limit: 1, on: connection)
            #expect(again.rows.map(\.id) == [3] && again.isLast)
        }

        /// The sweep runs up to a thousand times a second, so a session
        /// prepares it once; the prepared statement must follow the journal
        /// through an uninstall and install, which makes a new table.
        @Test func theSweepIsPreparedOnceAndOutlivesAReinstall() throws {
            let database = try TestDatabase.create()
            let reader = try database.connect()
            let admin = try database.connect()
            let swept = { (covered: TransactionSnapshot) throws -> [UInt64] in
                try Journal.sweep(after: covered, limit: 50, on: reader).page.rows.map(\.id)
            }
            let snapshot = { () throws -> TransactionSnapshot in
                try #require(TransactionSnapshot(try admin.execute("SELECT pg_current_snapshot()::text").rows[0][0] ?? ""))
            }
            let before = try snapshot()
            try admin.execute("INSERT INTO pgherald.journal_1 (id, txid, event) VALUES (1, pg_current_xact_id(), '{\"id\":\"1\"}')")
            #expect(try swept(before) == [1])
            #expect(try swept(before) == [1])
            let prepared = try reader.execute("SELECT name FROM pg_prepared_statements ORDER BY name")
            #expect(prepared.rows == [["pgherald_journal_sweep_50"]])

            try Installer.uninstall(on: admin)
            try Installer.install(on: admin)
            let reinstalled = try snapshot()
            try admin.execute("INSERT INTO pgherald.journal_1 (id, txid, event) VALUES (2, pg_current_xact_id(), '{\"id\":\"2\"}')")
            #expect(try swept(reinstalled) == [2])
        }

        /// A reader behind by more than a page reads the rows of a list of
        /// transactions. Planned as a join with the array, the estimate was the
        /// journal's size over 200 for each transaction: at a million rows, a
        /// cost past `jit_above_cost`, so each page compiled for tens of
        /// milliseconds before reading for two. The plan must expect about
        /// what it reads, whatever the journal's size.
        @Test func aListOfTransactionsIsPlannedAtItsOwnSize() throws {
            let database = try TestDatabase.create()
            let connection = try database.connect()
            try Self.fillJournal(rows: 100_000, on: connection)
            let wanted = (50_001...51_000).map { UInt64(1000 + $0) }
            let plan = try Self.plan(Journal.eventsOfTransactionsSQL, ["{" + wanted.map(String.init).joined(separator: ",") + "}"], on: connection)
            #expect(plan.rows <= 10_000, "planned for \(plan.rows) rows, to read 1,000")
            #expect(plan.cost < plan.jitAboveCost, "planned at a cost of \(plan.cost), past jit_above_cost (\(plan.jitAboveCost))")
            #expect(try Journal.events(transactionIDs: wanted, on: connection).rows.map(\.id) == Array(50_001...51_000))
        }

        /// A client that resumes after an event has it looked up by id. Each id
        /// behind the array was estimated at a share of the whole journal: past
        /// `jit_above_cost` at a million rows, for one id.
        @Test func aLookupByIDIsPlannedAtItsOwnSize() throws {
            let database = try TestDatabase.create()
            let connection = try database.connect()
            try Self.fillJournal(rows: 100_000, on: connection)
            let plan = try Self.plan(Journal.eventsWithIDsSQL, ["{90000}", "89901", "90000"], on: connection)
            #expect(plan.rows <= 200, "planned for \(plan.rows) rows, to read one")
            #expect(plan.cost < plan.jitAboveCost)
            #expect(try Journal.events(ids: [90_000, 99_999, 5], on: connection).map(\.id).sorted() == [5, 90_000, 99_999])
            #expect(try Journal.events(ids: [1], on: connection).map(\.transactionID) == [1001])
        }

        /// Journal rows 1...`rows`, one event each, transaction ids from 1001 up, with statistics.
        private static func fillJournal(rows: Int, on connection: LibpqConnection) throws {
            try connection.execute("""
                INSERT INTO pgherald.journal_1 (id, txid, event)
                SELECT n, (1000 + n)::text::xid8, '{"id":"' || n || '"}' FROM generate_series(1, \(rows)) AS n;
                ANALYZE pgherald.journal_1
                """)
        }

        /// The planner's expected rows and total cost for `sql`, and the cost past which it would compile.
        private static func plan(
            _ sql: String, _ parameters: [String], on connection: LibpqConnection
        ) throws -> (rows: Double, cost: Double, jitAboveCost: Double) {
            let explained = try #require(try connection.execute("EXPLAIN (FORMAT JSON) " + sql, parameters: parameters).scalar)
            let plans = try #require(try JSONSerialization.jsonObject(with: Data(explained.utf8)) as? [[String: Any]])
            let plan = try #require(plans.first?["Plan"] as? [String: Any])
            return (
                try #require(plan["Plan Rows"] as? Double),
                try #require(plan["Total Cost"] as? Double),
                try #require(Double(try connection.execute("SHOW jit_above_cost").scalar ?? ""))
            )
        }
    }
}
