import Herald
import HeraldPostgres
import Testing

/// Rows are read by column name, and a reader that asks for what is not there says so.
@Suite struct ResultRowTests {
    let row = ResultRow(
        columns: ["seq", "event_id", "attempts", "age_seconds", "expired", "snapshot", "last_status"],
        values: ["42", "1001", "3", "1.5", "t", "10:12:10", nil]
    )

    @Test func readsTypedValuesByName() throws {
        #expect(try row.value("seq", as: Int64.self) == 42)
        #expect(try row.value("event_id", as: String.self) == "1001")
        #expect(try row.value("age_seconds", as: Double.self) == 1.5)
        #expect(try row.value("expired", as: Bool.self))
        #expect(try row.value("snapshot", as: TransactionSnapshot.self) == TransactionSnapshot(xmin: 10, xmax: 12, inProgress: [10]))
        #expect(try row.optional("last_status", as: Int.self) == nil)
    }

    @Test func aMissingColumnANullAndTextOfTheWrongTypeAreErrorsThatNameTheColumn() {
        #expect(throws: LibpqError.self) { try row.text("last_error") }
        do {
            _ = try row.value("last_status", as: Int.self)
            Issue.record("NULL read as a value")
        } catch {
            #expect(error.message.contains("last_status is NULL"))
        }
        do {
            _ = try row.value("event_id", as: Bool.self)
            Issue.record("1001 read as a Bool")
        } catch {
            #expect(error.message.contains("event_id holds '1001'"))
        }
    }
}
