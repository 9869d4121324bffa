import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// The journal queries that catch-up and resumes page through.
    @Suite
    struct JournalQueryTests {
        @Test func pagesFollowTransactionIDsAsNumbersAcrossADigitBoundary() throws {
            let database = try TestDatabase.create()
            let connection = try database.connect()
            // Transaction ids from 995 to 1004: as text, "1000" sorts before "995".
            for (index, txid) in (995...1004).enumerated() {
                try connection.execute(
                    "INSERT INTO pgherald.journal (id, txid, event) VALUES ($1, $2::xid8, '{}')",
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
            try connection.execute("INSERT INTO pgherald.journal (id, txid, event) VALUES (1, '10', $1)", parameters: [event(1, 10)])
            try connection.execute(
                "INSERT INTO pgherald.journal (id, last_id, txid, event) VALUES (2, 5, '11', $1)",
                parameters: [(2...5).map { event($0, 11) }.joined(separator: "\u{1E}")]
            )
            try connection.execute("INSERT INTO pgherald.journal (id, txid, event) VALUES (6, '12', $1)", parameters: [event(6, 12)])
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
            try admin.execute("INSERT INTO pgherald.journal (id, txid, event) VALUES (1, pg_current_xact_id(), '{\"id\":\"1\"}')")
            #expect(try swept(before) == [1])
            #expect(try swept(before) == [1])
            let prepared = try reader.execute("SELECT name FROM pg_prepared_statements ORDER BY name")
            #expect(prepared.rows == [["pgherald_journal_sweep_50"]])

            try Installer.uninstall(on: admin)
            try Installer.install(on: admin)
            let reinstalled = try snapshot()
            try admin.execute("INSERT INTO pgherald.journal (id, txid, event) VALUES (2, pg_current_xact_id(), '{\"id\":\"2\"}')")
            #expect(try swept(reinstalled) == [2])
        }
    }
}
