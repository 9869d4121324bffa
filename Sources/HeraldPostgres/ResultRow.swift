public import Herald

/// One row of a query's result, read by column name: a query's columns can
/// be reordered or added to without its readers reading the wrong one.
public struct ResultRow: Sendable {
    let columnIndex: [String: Int]
    let values: [String?]

    init(columnIndex: [String: Int], values: [String?]) {
        self.columnIndex = columnIndex
        self.values = values
    }

    /// A row of `values` under the names `columns`, in order.
    public init(columns: [String], values: [String?]) {
        self.init(columnIndex: Dictionary(columns.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first }), values: values)
    }

    /// The column's text; nil for SQL NULL.
    /// - Throws: when the query has no such column, a mistake in the query or its reader.
    public func text(_ column: String) throws(LibpqError) -> String? {
        guard let index = columnIndex[column] else {
            throw LibpqError(.queryFailed, "the result has no column \(column); it has \(columnIndex.keys.sorted().joined(separator: ", "))")
        }
        return values[index]
    }

    /// The column's value, or nil for SQL NULL.
    /// - Throws: when the column is missing or its text is not a `Value`.
    public func optional<Value: RowValue>(_ column: String, as type: Value.Type = Value.self) throws(LibpqError) -> Value? {
        guard let text = try text(column) else { return nil }
        guard let value = Value(rowText: text) else {
            throw LibpqError(.queryFailed, "column \(column) holds '\(text.prefix(40))', which is not \(Value.self)")
        }
        return value
    }

    /// The column's value.
    /// - Throws: when the column is missing, NULL, or its text is not a `Value`.
    public func value<Value: RowValue>(_ column: String, as type: Value.Type = Value.self) throws(LibpqError) -> Value {
        guard let value = try optional(column, as: type) else {
            throw LibpqError(.queryFailed, "column \(column) is NULL where a \(Value.self) was expected")
        }
        return value
    }
}

/// A value read from a column's text, as libpq returns it.
public protocol RowValue {
    init?(rowText: String)
}

extension String: RowValue {
    public init?(rowText: String) { self = rowText }
}

extension Int: RowValue {
    public init?(rowText: String) { self.init(rowText) }
}

extension Int64: RowValue {
    public init?(rowText: String) { self.init(rowText) }
}

extension UInt64: RowValue {
    public init?(rowText: String) { self.init(rowText) }
}

extension Double: RowValue {
    public init?(rowText: String) { self.init(rowText) }
}

extension Bool: RowValue {
    public init?(rowText: String) {
        switch rowText {
        case "t": self = true
        case "f": self = false
        default: return nil
        }
    }
}

extension TransactionSnapshot: RowValue {
    public init?(rowText: String) { self.init(rowText) }
}

/// A type built from one result row, by column name.
public protocol RowDecodable {
    init(row: ResultRow) throws(LibpqError)
}

extension LibpqConnection.QueryResult {
    /// The rows, each read by column name.
    public var namedRows: [ResultRow] {
        let index = Dictionary(columns.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        return rows.map { ResultRow(columnIndex: index, values: $0) }
    }

    /// Every row as a `Row`.
    public func decode<Row: RowDecodable>(_ type: Row.Type) throws(LibpqError) -> [Row] {
        var decoded: [Row] = []
        decoded.reserveCapacity(rows.count)
        for row in namedRows { decoded.append(try Row(row: row)) }
        return decoded
    }

    /// The first column of the first row: the answer of a query that selects one value.
    public var scalar: String? {
        rows.first?.first ?? nil
    }
}
