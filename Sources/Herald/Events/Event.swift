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
    /// Everything about the event, shared: fanning an event out to a thousand
    /// subscribers copies one reference, not a dozen.
    final class Storage: Sendable {
        let id: String
        let count: UInt64
        let operation: Operation
        let table: TableName
        let primaryKeyJSON: RawJSON?
        let newJSON: RawJSON?
        let oldJSON: RawJSON?
        let transactionID: String
        let at: String
        let rowDataOmitted: Bool
        let leftView: Bool
        let endsTransaction: Bool
        let partition: TableName?
        /// The compact JSON, encoded once by the broker when it stamps the count.
        let encodedJSON: [UInt8]?

        init(
            id: String, count: UInt64, operation: Operation, table: TableName,
            primaryKeyJSON: RawJSON?, newJSON: RawJSON?, oldJSON: RawJSON?,
            transactionID: String, at: String, rowDataOmitted: Bool, leftView: Bool = false, endsTransaction: Bool,
            partition: TableName?, encodedJSON: [UInt8]?
        ) {
            self.id = id
            self.count = count
            self.operation = operation
            self.table = table
            self.primaryKeyJSON = primaryKeyJSON
            self.newJSON = newJSON
            self.oldJSON = oldJSON
            self.transactionID = transactionID
            self.at = at
            self.rowDataOmitted = rowDataOmitted
            self.leftView = leftView
            self.endsTransaction = endsTransaction
            self.partition = partition
            self.encodedJSON = encodedJSON
        }
    }

    let storage: Storage

    /// Stable, unique event id assigned by the publishing trigger.
    public var id: String { storage.id }
    /// The broker's change counter at this event; 0 until the broker stamps it.
    public var count: UInt64 { storage.count }
    public var operation: Operation { storage.operation }
    public var table: TableName { storage.table }
    /// Primary-key columns of the changed row; `nil` for TRUNCATE and tables without a primary key.
    public var primaryKeyJSON: RawJSON? { storage.primaryKeyJSON }
    /// The row after the change (INSERT, UPDATE).
    public var newJSON: RawJSON? { storage.newJSON }
    /// The full row before the change (UPDATE, DELETE).
    public var oldJSON: RawJSON? { storage.oldJSON }
    /// PostgreSQL transaction id (`xid8`) of the writing transaction, as text.
    public var transactionID: String { storage.transactionID }
    /// When the trigger ran, as ISO 8601 text in UTC with microseconds.
    public var at: String { storage.at }
    /// True when the row was too large for a notification and `new`/`old` were left out.
    public var rowDataOmitted: Bool { storage.rowDataOmitted }
    /// True for an UPDATE that took the row out of a row-level-security
    /// subscriber's view: it carries the old row as that subscriber could
    /// see it and no new row, and is `"left_view":true` in JSON.
    public var leftView: Bool { storage.leftView }
    /// True when the listener knows this is its transaction's last event.
    /// It marks ends only while something groups events by transaction
    /// (``Broker/demandTransactionEnds()``), and only in durable mode, where
    /// the journal says how many events a transaction has. Not part of the
    /// event's identity or its JSON.
    public var endsTransaction: Bool { storage.endsTransaction }
    /// For a row of a partition: the partition it is stored in. The event
    /// itself names the partitioned table the partition belongs to
    /// (``table``), as Supabase publishes partitions under their root.
    /// `"partition_schema"` and `"partition"` in JSON.
    public var partition: TableName? { storage.partition }
    var encodedJSON: [UInt8]? { storage.encodedJSON }

    /// About what holding this event costs in memory: its encoded JSON and
    /// rows as allocated, and the object, strings and index entry around
    /// them. The history's byte limit counts this, as do kept replay pages.
    public var retainedBytes: Int {
        var bytes = Self.retainedOverhead
        if let json = storage.encodedJSON {
            // A stamped event's rows are slices of its JSON.
            bytes += json.capacity + 32
        } else {
            bytes += (primaryKeyJSON?.bytes.count ?? 0) + (newJSON?.bytes.count ?? 0) + (oldJSON?.bytes.count ?? 0) + 32
        }
        return bytes
    }

    /// The storage object, its strings kept on the heap, and the history's
    /// index entry, measured with malloc's headers.
    static let retainedOverhead = 320

    init(
        id: String,
        count: UInt64 = 0,
        operation: Operation,
        table: TableName,
        primaryKeyJSON: RawJSON?,
        newJSON: RawJSON?,
        oldJSON: RawJSON?,
        transactionID: String,
        at: String,
        rowDataOmitted: Bool,
        leftView: Bool = false,
        partition: TableName? = nil
    ) {
        storage = Storage(
            id: id, count: count, operation: operation, table: table,
            primaryKeyJSON: primaryKeyJSON, newJSON: newJSON, oldJSON: oldJSON,
            transactionID: transactionID, at: at, rowDataOmitted: rowDataOmitted, leftView: leftView, endsTransaction: false,
            partition: partition, encodedJSON: nil
        )
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
        rowDataOmitted: Bool = false,
        partition: TableName? = nil
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
            rowDataOmitted: rowDataOmitted,
            partition: partition
        )
    }

    private init(storage: Storage) {
        self.storage = storage
    }

    /// This event with the broker's change count, and its JSON encoded once
    /// for every output. SSE streams write the few lines around that JSON as
    /// they frame a batch, so that the history keeps the JSON only; the
    /// stamped event's rows are slices of it.
    func stamped(count: UInt64) -> Event {
        let encoded = encodeJSON(count: count)
        let json = encoded.bytes
        return Event(storage: Storage(
            id: id, count: count, operation: operation, table: table,
            primaryKeyJSON: encoded.primaryKey.map { RawJSON(validatedBytes: json[$0]) },
            newJSON: encoded.new.map { RawJSON(validatedBytes: json[$0]) },
            oldJSON: encoded.old.map { RawJSON(validatedBytes: json[$0]) },
            transactionID: transactionID, at: at, rowDataOmitted: rowDataOmitted, leftView: leftView, endsTransaction: endsTransaction,
            partition: partition, encodedJSON: json
        ))
    }

    /// This event, marked as the last of its transaction.
    public func endingTransaction() -> Event {
        Event(storage: Storage(
            id: id, count: count, operation: operation, table: table,
            primaryKeyJSON: primaryKeyJSON, newJSON: newJSON, oldJSON: oldJSON,
            transactionID: transactionID, at: at, rowDataOmitted: rowDataOmitted, leftView: leftView, endsTransaction: true,
            partition: partition, encodedJSON: storage.encodedJSON
        ))
    }

    public var primaryKey: JSONObject? { primaryKeyJSON?.value.objectValue }

    public var new: JSONObject? { newJSON?.value.objectValue }

    public var old: JSONObject? { oldJSON?.value.objectValue }

    /// The row a column predicate looks at: the new row, or the old one for DELETE.
    public var row: JSONObject? { new ?? old }

    public static func == (lhs: Event, rhs: Event) -> Bool {
        lhs.storage === rhs.storage
            || (lhs.id == rhs.id && lhs.count == rhs.count && lhs.operation == rhs.operation && lhs.table == rhs.table
                && lhs.primaryKeyJSON == rhs.primaryKeyJSON && lhs.newJSON == rhs.newJSON && lhs.oldJSON == rhs.oldJSON
                && lhs.transactionID == rhs.transactionID && lhs.at == rhs.at && lhs.rowDataOmitted == rhs.rowDataOmitted
                && lhs.leftView == rhs.leftView && lhs.partition == rhs.partition)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(count)
    }
}
