/// One evaluation of a live query: its rows, and the snapshot they were read in.
public struct LiveQueryResult: Sendable, Hashable {
    /// Identifies a row within a result: its key columns' values as a JSON array.
    public typealias RowKey = RawJSON

    public var query: String
    /// Counts evaluations whose rows differed, from 1, within ``generation``.
    public var version: UInt64
    /// Names one run of the evaluation, so that a version from an earlier run
    /// (or another daemon) is never taken for this one's.
    public var generation: String
    /// What the rows include: every transaction this snapshot shows committed, and no other.
    public var snapshot: TransactionSnapshot
    /// The rows, each a JSON object, in the order the query returned them.
    public private(set) var rows: [RawJSON]
    /// The rows by key, as ``rows`` orders them.
    public private(set) var keys: [RowKey]
    private var indexByKey: [RowKey: Int]

    /// - Throws: ``LiveQueryError/Code/queryFailed`` when two rows share a key.
    public init(
        query: String, version: UInt64, generation: String, snapshot: TransactionSnapshot, rows: [RawJSON], keyColumns: [String]
    ) throws(LiveQueryError) {
        self.query = query
        self.version = version
        self.generation = generation
        self.snapshot = snapshot
        self.rows = rows
        keys = []
        keys.reserveCapacity(rows.count)
        indexByKey = Dictionary(minimumCapacity: rows.count)
        for (index, row) in rows.enumerated() {
            let key = try Self.key(of: row, columns: keyColumns, query: query)
            guard indexByKey.updateValue(index, forKey: key) == nil else {
                throw LiveQueryError(.queryFailed, "query \(query): two rows have the key \(key); its key columns (\(keyColumns.joined(separator: ", "))) must identify one row")
            }
            keys.append(key)
        }
    }

    /// The row with `key`, if the result has one.
    public subscript(key: RowKey) -> RawJSON? {
        indexByKey[key].map { rows[$0] }
    }

    /// The resume token of this result: `GENERATION.VERSION`.
    public var token: String { "\(generation).\(version)" }

    /// What changed from `older` to this result; empty when the rows are the same.
    public func difference(from older: LiveQueryResult) -> LiveQueryDifference {
        var added: [RawJSON] = []
        var changed: [RawJSON] = []
        for (index, key) in keys.enumerated() {
            switch older[key] {
            case nil: added.append(rows[index])
            case let previous? where previous != rows[index]: changed.append(rows[index])
            default: break
            }
        }
        let removed = older.keys.filter { indexByKey[$0] == nil }
        return LiveQueryDifference(added: added, changed: changed, removed: removed)
    }

    /// The key columns of `row` as a JSON array; a column the row lacks is refused.
    static func key(of row: RawJSON, columns: [String], query: String) throws(LiveQueryError) -> RowKey {
        guard case .object(let object) = row.value else {
            throw LiveQueryError(.queryFailed, "query \(query) returned a row that is not an object")
        }
        var values: [JSONValue] = []
        values.reserveCapacity(columns.count)
        for column in columns {
            guard let value = object[column] else {
                throw LiveQueryError(.queryFailed, "query \(query) has no result column \(column), which its key names (it has \(object.keys.joined(separator: ", ")))")
            }
            values.append(value)
        }
        return RawJSON(.array(values))
    }
}
