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
                seen += page.map(\.transactionID)
                guard let last = page.last, page.count == 3 else { break }
                after = (last.transactionID, last.id)
            }
            #expect(seen == Array(995...1004))
        }
    }
}
