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
    /// Decodes a notification payload written by pgherald's trigger.
    ///
    /// Unknown members are ignored so that newer triggers stay readable.
    /// Anything else that deviates from the event shape is rejected.
    public init(payload bytes: UnsafeBufferPointer<UInt8>) throws(EventDecodingError) {
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes)
        } catch {
            throw EventDecodingError(code: .invalidJSON, detail: error.description)
        }
        try self.init(json: value)
    }

    public init(payload: String) throws(EventDecodingError) {
        var payload = payload
        let result: Result<Event, EventDecodingError> = payload.withUTF8 { buffer in
            Result { () throws(EventDecodingError) in try Event(payload: buffer) }
        }
        self = try result.get()
    }

    public init(json value: JSONValue) throws(EventDecodingError) {
        guard case .object(let object) = value else {
            throw EventDecodingError(code: .notAnObject, detail: "")
        }
        let opName = try Self.requiredString("op", in: object)
        guard let operation = Operation(rawValue: opName) else {
            throw EventDecodingError(code: .unknownOperation, detail: String(opName.prefix(32)))
        }
        let omitted: Bool
        switch object["omitted"] {
        case nil, .null?: omitted = false
        case .bool(let flag)?: omitted = flag
        default: throw EventDecodingError(code: .wrongType, detail: "\"omitted\" must be a boolean")
        }
        self.init(
            id: try Self.requiredString("id", in: object),
            operation: operation,
            table: TableName(
                schema: try Self.requiredString("schema", in: object),
                name: try Self.requiredString("table", in: object)
            ),
            primaryKey: try Self.optionalObject("pk", in: object),
            new: try Self.optionalObject("new", in: object),
            old: try Self.optionalObject("old", in: object),
            transactionID: try Self.requiredString("txid", in: object),
            at: try Self.requiredString("at", in: object),
            rowDataOmitted: omitted
        )
        try validateRows()
    }

    private func validateRows() throws(EventDecodingError) {
        if rowDataOmitted { return }
        let expected: (new: Bool, old: Bool)
        switch operation {
        case .insert: expected = (true, false)
        case .update: expected = (true, true)
        case .delete: expected = (false, true)
        case .truncate: expected = (false, false)
        }
        guard (new != nil) == expected.new, (old != nil) == expected.old else {
            throw EventDecodingError(
                code: .inconsistentRows,
                detail: "\(operation) must carry \(expected.new ? "a" : "no") new row and \(expected.old ? "an" : "no") old row"
            )
        }
    }

    private static func requiredString(_ key: String, in object: JSONObject) throws(EventDecodingError) -> String {
        switch object[key] {
        case .string(let string)? where !string.isEmpty: return string
        case nil, .null?: throw EventDecodingError(code: .missingField, detail: key)
        default: throw EventDecodingError(code: .wrongType, detail: "\"\(key)\" must be a non-empty string")
        }
    }

    private static func optionalObject(_ key: String, in object: JSONObject) throws(EventDecodingError) -> JSONObject? {
        switch object[key] {
        case nil, .null?: return nil
        case .object(let member)?: return member
        default: throw EventDecodingError(code: .wrongType, detail: "\"\(key)\" must be an object or null")
        }
    }
}

extension Event {
    /// The event as compact JSON in the shared shape, without a trailing newline.
    ///
    /// Returns the bytes the broker encoded when it stamped the event, so
    /// outputs never encode the same event twice.
    public var jsonBytes: [UInt8] {
        encodedJSON ?? encodeJSON()
    }

    /// Encodes the event; the broker calls this once per event.
    func encodeJSON() -> [UInt8] {
        var writer = JSONWriter(reservingCapacity: 256)
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
        writer.write(primaryKey.map(JSONValue.object))
        writer.writeKey("new")
        writer.write(new.map(JSONValue.object))
        writer.writeKey("old")
        writer.write(old.map(JSONValue.object))
        writer.writeKey("txid")
        writer.write(string: transactionID)
        writer.writeKey("at")
        writer.write(string: at)
        if rowDataOmitted {
            writer.writeKey("omitted")
            writer.writeRaw("true")
        }
        writer.writeRaw(UInt8(ascii: "}"))
        return writer.bytes
    }

    /// The event as a JSON string in the shared shape.
    public var jsonText: String { String(decoding: jsonBytes, as: UTF8.self) }
}
