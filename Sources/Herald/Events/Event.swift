/// One row change, in the shape every pgherald output shares.
///
/// ```json
/// {"id":"1042","count":17,"op":"INSERT","schema":"public","table":"course",
///  "pk":{"id":11},"new":{"id":11,"short_code":"ADA3M","name":"Drama"},"old":null,
///  "txid":"7791","at":"2026-11-21T12:00:00.123456Z"}
/// ```
///
/// Row data is held as validated compact JSON (``RawJSON``): outputs copy it
/// as it is, and `new`, `old` and `primaryKey` parse it when asked.
public struct Event: Sendable, Hashable {
    /// Stable, unique event id assigned by the publishing trigger.
    public let id: String
    /// The broker's change counter at this event; 0 until the broker stamps it.
    public internal(set) var count: UInt64
    public let operation: Operation
    public let table: TableName
    /// Primary-key columns of the changed row; `nil` for TRUNCATE and tables without a primary key.
    public let primaryKeyJSON: RawJSON?
    /// The row after the change (INSERT, UPDATE).
    public let newJSON: RawJSON?
    /// The full row before the change (UPDATE, DELETE).
    public let oldJSON: RawJSON?
    /// PostgreSQL transaction id (`xid8`) of the writing transaction, as text.
    public let transactionID: String
    /// When the trigger ran, as ISO 8601 text in UTC with microseconds.
    public let at: String
    /// True when the row was too large for a notification and `new`/`old` were left out.
    public let rowDataOmitted: Bool

    /// The compact JSON of this event, filled in once by the broker so that
    /// every subscriber shares the same bytes.
    var encodedJSON: [UInt8]?

    init(
        id: String,
        operation: Operation,
        table: TableName,
        primaryKeyJSON: RawJSON?,
        newJSON: RawJSON?,
        oldJSON: RawJSON?,
        transactionID: String,
        at: String,
        rowDataOmitted: Bool
    ) {
        self.id = id
        self.count = 0
        self.operation = operation
        self.table = table
        self.primaryKeyJSON = primaryKeyJSON
        self.newJSON = newJSON
        self.oldJSON = oldJSON
        self.transactionID = transactionID
        self.at = at
        self.rowDataOmitted = rowDataOmitted
    }

    public init(
        id: String,
        operation: Operation,
        table: TableName,
        primaryKey: JSONObject? = nil,
        new: JSONObject? = nil,
        old: JSONObject? = nil,
        transactionID: String,
        at: String,
        rowDataOmitted: Bool = false
    ) {
        self.init(
            id: id,
            operation: operation,
            table: table,
            primaryKeyJSON: primaryKey.map { RawJSON(.object($0)) },
            newJSON: new.map { RawJSON(.object($0)) },
            oldJSON: old.map { RawJSON(.object($0)) },
            transactionID: transactionID,
            at: at,
            rowDataOmitted: rowDataOmitted
        )
    }

    public var primaryKey: JSONObject? { primaryKeyJSON?.value.objectValue }

    public var new: JSONObject? { newJSON?.value.objectValue }

    public var old: JSONObject? { oldJSON?.value.objectValue }

    /// The row a column predicate looks at: the new row, or the old one for DELETE.
    public var row: JSONObject? { new ?? old }

    public static func == (lhs: Event, rhs: Event) -> Bool {
        lhs.id == rhs.id && lhs.count == rhs.count && lhs.operation == rhs.operation && lhs.table == rhs.table
            && lhs.primaryKeyJSON == rhs.primaryKeyJSON && lhs.newJSON == rhs.newJSON && lhs.oldJSON == rhs.oldJSON
            && lhs.transactionID == rhs.transactionID && lhs.at == rhs.at && lhs.rowDataOmitted == rhs.rowDataOmitted
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(count)
    }
}
