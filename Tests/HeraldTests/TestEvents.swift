@testable import Herald

/// A minimal valid event for broker and filter tests.
func makeEvent(
    _ id: Int,
    table: String = "course",
    schema: String = "public",
    operation: Operation = .insert,
    transaction: String = "1"
) -> Event {
    let row: JSONObject = ["id": .number(JSONNumber(Int64(id)))]
    return Event(
        id: String(id),
        operation: operation,
        table: TableName(schema: schema, name: table),
        primaryKey: operation == .truncate ? nil : row,
        new: operation == .insert || operation == .update ? row : nil,
        old: operation == .update || operation == .delete ? row : nil,
        transactionID: transaction,
        at: "2026-11-21T12:00:00.000000Z"
    )
}
