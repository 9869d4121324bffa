public import Herald

/// A live query's rows as a client holds them: the whole result, kept
/// current by applying each difference the daemon sends.
public struct LiveQueryRows: Sendable, Hashable {
    /// The key columns, as the daemon's first result names them.
    public private(set) var key: [String] = []
    /// The rows, in the order of the first result, with added rows at the end.
    public private(set) var rows: [RawJSON] = []
    /// The resume token of the result these rows are (`Last-Event-ID`).
    public private(set) var token: String?
    /// The snapshot of that result: every transaction it shows committed is in the rows.
    public private(set) var snapshot: TransactionSnapshot?
    private var indexByKey: [RawJSON: Int] = [:]

    public init() {}

    /// Applies one `result` or `diff` frame's JSON.
    /// - Throws: a frame that is neither, or a diff before any result.
    public mutating func apply(frame text: String) throws(HeraldClientError) {
        guard let object = try? JSONParser.parse(text).objectValue, case .string(let type)? = object["type"] else {
            throw HeraldClientError(code: .protocolError, message: "a live query frame is not a JSON object with a type: \(text.prefix(120))")
        }
        token = object["id"]?.stringValue
        snapshot = object["snapshot"]?.stringValue.flatMap { TransactionSnapshot($0) }
        switch type {
        case "result":
            guard case .array(let columns)? = object["key"], case .array(let all)? = object["rows"] else {
                throw HeraldClientError(code: .protocolError, message: "a live query result without key or rows")
            }
            key = columns.compactMap(\.stringValue)
            rows = []
            indexByKey = [:]
            for row in all { upsert(RawJSON(row)) }
        case "diff":
            guard !key.isEmpty else { throw HeraldClientError(code: .protocolError, message: "a live query diff came before its result") }
            for name in ["added", "changed"] {
                guard case .array(let changed)? = object[name] else { continue }
                for row in changed { upsert(RawJSON(row)) }
            }
            if case .array(let removed)? = object["removed"] {
                let gone = Set(removed.map(keyOf))
                let kept = rows.filter { !gone.contains(keyOf($0.value)) }
                rows = kept
                indexByKey = Dictionary(uniqueKeysWithValues: kept.enumerated().map { (keyOf($0.element.value), $0.offset) })
            }
        default:
            throw HeraldClientError(code: .protocolError, message: "a live query frame of unknown type \(type)")
        }
    }

    /// The rows decoded into the app's own type (snake_case columns to camelCase properties).
    public func decode<Row: Decodable>(_ type: Row.Type, decoder: RowDecoder = RowDecoder()) throws -> [Row] {
        try rows.map { try decoder.decode(type, from: $0) }
    }

    private mutating func upsert(_ row: RawJSON) {
        let rowKey = keyOf(row.value)
        if let index = indexByKey[rowKey] {
            rows[index] = row
        } else {
            indexByKey[rowKey] = rows.count
            rows.append(row)
        }
    }

    private func keyOf(_ value: JSONValue) -> RawJSON {
        let object = value.objectValue ?? JSONObject()
        return RawJSON(.array(key.map { object[$0] ?? .null }))
    }
}
