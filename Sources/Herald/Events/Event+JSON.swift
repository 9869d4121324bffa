/// Why a notification payload is not a pgherald event.
public struct EventDecodingError: Error, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable {
        case invalidJSON
        case notAnObject
        case missingField
        case wrongType
        case unknownOperation
        case inconsistentRows
    }

    public var code: Code
    public var detail: String

    public var description: String {
        switch code {
        case .invalidJSON: return detail
        case .notAnObject: return "payload is not a JSON object"
        case .missingField: return "missing field \"\(detail)\""
        case .wrongType: return "field \(detail)"
        case .unknownOperation: return "unknown op \"\(detail)\""
        case .inconsistentRows: return detail
        }
    }
}

extension Event {
    /// Decodes a notification payload written by pgherald's trigger, or an
    /// event as the daemon sends it (then `count` is kept).
    ///
    /// The whole payload is validated; row data is kept as compact raw JSON.
    /// Unknown members are ignored so that newer triggers stay readable.
    /// Anything else that deviates from the event shape is rejected.
    public init(payload bytes: UnsafeBufferPointer<UInt8>) throws(EventDecodingError) {
        var fields = Fields()
        let isObject: Bool
        do {
            isObject = try JSONParser.readMembers(bytes) { name, parser throws(JSONParsingError) in
                try fields.read(name, from: &parser)
            }
        } catch {
            throw EventDecodingError(code: .invalidJSON, detail: error.description)
        }
        guard isObject else { throw EventDecodingError(code: .notAnObject, detail: "") }
        let count = try fields.changeCount()
        let opName = try Fields.requiredString(fields.op, "op")
        guard let operation = Operation(rawValue: opName) else {
            throw EventDecodingError(code: .unknownOperation, detail: String(opName.prefix(32)))
        }
        self.init(
            id: try Fields.requiredString(fields.id, "id"),
            count: count,
            operation: operation,
            table: TableName(schema: try Fields.requiredString(fields.schema, "schema"), name: try Fields.requiredString(fields.table, "table")),
            primaryKeyJSON: try fields.row(fields.pk, "pk"),
            newJSON: try fields.row(fields.new, "new"),
            oldJSON: try fields.row(fields.old, "old"),
            transactionID: try Fields.requiredString(fields.txid, "txid"),
            at: try Fields.requiredString(fields.at, "at"),
            rowDataOmitted: try fields.isOmitted(),
            leftView: try fields.hasLeftView(),
            partition: try fields.storedIn()
        )
        try validateRows()
    }

    public init(payload: String) throws(EventDecodingError) {
        try self.init(payload: payload[...])
    }

    /// Decodes an event that is part of a longer text, such as one of a journal batch, without copying it out.
    public init(payload: Substring) throws(EventDecodingError) {
        var payload = payload
        let result: Result<Event, EventDecodingError> = payload.withUTF8 { buffer in
            Result { () throws(EventDecodingError) in try Event(payload: buffer) }
        }
        self = try result.get()
    }

    private func validateRows() throws(EventDecodingError) {
        if rowDataOmitted { return }
        let expected: (new: Bool, old: Bool)
        switch operation {
        case .update where leftView: expected = (false, true)
        case .insert, .broadcast: expected = (true, false)
        case .update: expected = (true, true)
        case .delete: expected = (false, true)
        case .truncate: expected = (false, false)
        }
        guard (newJSON != nil) == expected.new, (oldJSON != nil) == expected.old else {
            throw EventDecodingError(
                code: .inconsistentRows,
                detail: "\(operation) must carry \(expected.new ? "a" : "no") new row and \(expected.old ? "an" : "no") old row"
            )
        }
    }

    /// The members of a payload object, sorted into their fields as they are read.
    private struct Fields {
        var id, op, schema, table, txid, at, count, omitted, leftView, partitionSchema, partition: JSONParser.ShallowValue?
        var pk, new, old: JSONParser.RowValue?
        /// The rows' text, one after another.
        var rows: [UInt8] = []

        /// Reads the value of the member `name`; the last of a repeated name counts, and unknown ones are validated and ignored.
        mutating func read(_ name: UnsafeBufferPointer<UInt8>, from parser: inout JSONParser) throws(JSONParsingError) {
            func named(_ known: StaticString) -> Bool {
                known.utf8CodeUnitCount == name.count && known.withUTF8Buffer { $0.elementsEqual(name) }
            }
            // By length first: most names are told apart without comparing a byte.
            switch name.count {
            case 2 where named("pk"):
                pk = try parser.readRowValue(appendingTo: &rows)
                return
            case 3:
                if named("new") {
                    new = try parser.readRowValue(appendingTo: &rows)
                    return
                } else if named("old") {
                    old = try parser.readRowValue(appendingTo: &rows)
                    return
                }
            default:
                break
            }
            let value = try parser.readShallowValue()
            switch name.count {
            case 2:
                if named("id") { id = value } else if named("op") { op = value } else if named("at") { at = value }
            case 4:
                if named("txid") { txid = value }
            case 5:
                if named("table") { table = value } else if named("count") { count = value }
            case 6:
                if named("schema") { schema = value }
            case 7:
                if named("omitted") { omitted = value }
            case 9:
                if named("left_view") { leftView = value } else if named("partition") { partition = value }
            case 16:
                if named("partition_schema") { partitionSchema = value }
            default:
                break
            }
        }

        static func requiredString(_ value: JSONParser.ShallowValue?, _ key: String) throws(EventDecodingError) -> String {
            switch value {
            case .string(let string)? where !string.isEmpty: return string
            case nil, .null?: throw EventDecodingError(code: .missingField, detail: key)
            default: throw EventDecodingError(code: .wrongType, detail: "\"\(key)\" must be a non-empty string")
            }
        }

        /// A row as a slice of `rows`, which its event's rows share.
        func row(_ value: JSONParser.RowValue?, _ key: String) throws(EventDecodingError) -> RawJSON? {
            switch value {
            case nil, .null?: return nil
            case .object(let range)?: return RawJSON(validatedBytes: rows[range])
            case .notAnObject?: throw EventDecodingError(code: .wrongType, detail: "\"\(key)\" must be an object or null")
            }
        }

        func changeCount() throws(EventDecodingError) -> UInt64 {
            switch count {
            case nil, .null?: return 0
            case .other(let raw)? where UInt64(raw.description) != nil:
                return UInt64(raw.description)!
            default: throw EventDecodingError(code: .wrongType, detail: "\"count\" must be a non-negative integer")
            }
        }

        /// The partition a partitioned table's row is stored in, named by both fields or neither.
        func storedIn() throws(EventDecodingError) -> TableName? {
            switch (partitionSchema, partition) {
            case (nil, nil), (.null?, .null?): return nil
            default: return TableName(schema: try Self.requiredString(partitionSchema, "partition_schema"), name: try Self.requiredString(partition, "partition"))
            }
        }

        func isOmitted() throws(EventDecodingError) -> Bool {
            try Self.flag(omitted, "omitted")
        }

        func hasLeftView() throws(EventDecodingError) -> Bool {
            try Self.flag(leftView, "left_view")
        }

        private static func flag(_ value: JSONParser.ShallowValue?, _ key: String) throws(EventDecodingError) -> Bool {
            switch value {
            case nil, .null?: return false
            case .bool(let flag)?: return flag
            default: throw EventDecodingError(code: .wrongType, detail: "\"\(key)\" must be a boolean")
            }
        }
    }
}

extension Event {
    /// The event as compact JSON in the shared shape, without a trailing newline.
    ///
    /// Returns the bytes the broker encoded when it stamped the event, so
    /// outputs never encode the same event twice.
    public var jsonBytes: [UInt8] {
        encodedJSON ?? encodeJSON(count: count).bytes
    }

    /// An event's JSON, and where its rows lie in it.
    struct EncodedJSON {
        var bytes: [UInt8]
        var primaryKey, new, old: Range<Int>?
    }

    /// Encodes the event with `count`; the broker calls this once per event.
    func encodeJSON(count: UInt64) -> EncodedJSON {
        // Sized to fit: the history keeps these bytes, and spare capacity would be kept with them.
        let rows = (primaryKeyJSON?.bytes.count ?? 4) + (newJSON?.bytes.count ?? 4) + (oldJSON?.bytes.count ?? 4)
        let names = id.utf8.count + table.schema.utf8.count + table.name.utf8.count + transactionID.utf8.count + at.utf8.count
            + (partition.map { 40 + $0.schema.utf8.count + $0.name.utf8.count } ?? 0)
        var writer = JSONWriter(reservingCapacity: 128 + rows + names)
        writer.writeRaw(UInt8(ascii: "{"))
        writer.writeKey("id", first: true)
        writer.write(string: id)
        writer.writeKey("count")
        writer.writeRaw(String(count))
        writer.writeKey("op")
        writer.write(string: operation.rawValue)
        writer.writeKey("schema")
        writer.write(string: table.schema)
        writer.writeKey("table")
        writer.write(string: table.name)
        writer.writeKey("pk")
        let primaryKey = writer.write(raw: primaryKeyJSON)
        writer.writeKey("new")
        let new = writer.write(raw: newJSON)
        writer.writeKey("old")
        let old = writer.write(raw: oldJSON)
        writer.writeKey("txid")
        writer.write(string: transactionID)
        writer.writeKey("at")
        writer.write(string: at)
        if rowDataOmitted {
            writer.writeKey("omitted")
            writer.writeRaw("true")
        }
        if leftView {
            writer.writeKey("left_view")
            writer.writeRaw("true")
        }
        if let partition {
            writer.writeKey("partition_schema")
            writer.write(string: partition.schema)
            writer.writeKey("partition")
            writer.write(string: partition.name)
        }
        writer.writeRaw(UInt8(ascii: "}"))
        return EncodedJSON(bytes: writer.bytes, primaryKey: primaryKey, new: new, old: old)
    }

    /// The event as a JSON string in the shared shape.
    public var jsonText: String { String(decoding: jsonBytes, as: UTF8.self) }
}
