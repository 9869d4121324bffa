/// One row change, in the shape every pgherald output shares.
///
/// ```json
/// {"id":"1042","count":17,"op":"INSERT","schema":"public","table":"course",
///  "pk":{"id":11},"new":{"id":11,"short_code":"ADA3M","name":"Drama"},"old":null,
///  "txid":"7791","at":"2026-11-21T12:00:00.123456Z"}
/// ```
public struct Event: Sendable, Hashable {
    /// Stable, unique event id assigned by the publishing trigger.
    public let id: String
    /// The broker's change counter at this event; 0 until the broker stamps it.
    public internal(set) var count: UInt64
    public let operation: Operation
    public let table: TableName
    /// Primary-key columns of the changed row; `nil` for TRUNCATE and tables without a primary key.
    public let primaryKey: JSONObject?
    /// The row after the change (INSERT, UPDATE).
    public let new: JSONObject?
    /// The full row before the change (UPDATE, DELETE).
    public let old: JSONObject?
    /// PostgreSQL transaction id (`xid8`) of the writing transaction, as text.
    public let transactionID: String
    /// When the trigger ran, as ISO 8601 text in UTC with microseconds.
    public let at: String
    /// True when the row was too large for a notification and `new`/`old` were left out.
    public let rowDataOmitted: Bool

    /// The compact JSON of this event, filled in once by the broker so that
    /// every subscriber shares the same bytes.
    var encodedJSON: [UInt8]?

    public init(
        id: String,
        count: UInt64 = 0,
        operation: Operation,
        table: TableName,
        primaryKey: JSONObject? = nil,
        new: JSONObject? = nil,
        old: JSONObject? = nil,
        transactionID: String,
        at: String,
        rowDataOmitted: Bool = false
    ) {
        self.id = id
        self.count = count
        self.operation = operation
        self.table = table
        self.primaryKey = primaryKey
        self.new = new
        self.old = old
        self.transactionID = transactionID
        self.at = at
        self.rowDataOmitted = rowDataOmitted
    }

    /// The row a column predicate looks at: the new row, or the old one for DELETE.
    public var row: JSONObject? { new ?? old }

    public static func == (lhs: Event, rhs: Event) -> Bool {
        lhs.id == rhs.id && lhs.count == rhs.count && lhs.operation == rhs.operation && lhs.table == rhs.table
            && lhs.primaryKey == rhs.primaryKey && lhs.new == rhs.new && lhs.old == rhs.old
            && lhs.transactionID == rhs.transactionID && lhs.at == rhs.at && lhs.rowDataOmitted == rhs.rowDataOmitted
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(count)
    }
}
