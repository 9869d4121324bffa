import Foundation
import Herald
import HeraldPostgres
@testable import HeraldSupabase
import Logging
import Testing

struct ChangeDataCacheTests {
    /// A catalog that cannot connect: the cache falls back on the row's own keys, with no database.
    static let catalog = SchemaCatalog(
        connection: try! ConnectionString("host=/nonexistent/pgherald-test port=1 connect_timeout=1"), logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
    )

    /// Rows of 100 kB: the cache keeps no more than its bytes, however few
    /// events that is; it kept its 8,192 events whatever their size.
    @Test func theCacheIsBoundedInBytesAsWellAsEvents() async throws {
        let cache = ChangeDataCache(catalog: Self.catalog, capacity: 8192, byteCapacity: 1 << 20)
        let body = String(repeating: "q", count: 100_000)
        for id in 1...40 {
            let row: JSONObject = ["id": .number(JSONNumber(Int64(id))), "body": .string(body)]
            let event = Event(id: String(id), operation: .insert, table: TableName(name: "note"), primaryKey: ["id": .number(JSONNumber(Int64(id)))], new: row, transactionID: "1", at: "2026-11-30T12:00:00.000000Z")
            let data = await cache.data(for: event)
            #expect(data.count > 100_000)
        }
        #expect(cache.heldBytes <= 1 << 20, "\(cache.heldBytes) bytes held")
        #expect(cache.heldBytes > 900_000, "the newest rows stay: \(cache.heldBytes) bytes held")
    }
}
