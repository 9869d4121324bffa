public import Herald

/// A table column as `postgres_changes` describes it: name and PostgreSQL
/// `typname` (`int8`, `text`, `_int4` for an integer array).
public struct RealtimeColumn: Sendable, Hashable {
    public var name: String
    public var type: String

    public init(name: String, type: String) {
        self.name = name
        self.type = type
    }
}

/// The `data` object of a `postgres_changes` event, and the payload around it.
public enum ChangePayload {
    /// Whether Supabase clients have a name for the event's kind; TRUNCATE has none.
    public static func carries(_ event: Event) -> Bool {
        event.operation != .truncate
    }

    /// `{"schema","table","commit_timestamp","type","columns","record","old_record","errors"}`.
    ///
    /// `record` is the new row (INSERT, UPDATE) and `old_record` the complete
    /// old row (UPDATE, DELETE), copied as the trigger wrote them. Only an
    /// event whose rows were too large for a notify-only notification lacks
    /// them, and says so in `errors` as Supabase does.
    ///
    /// An UPDATE that took the row out of a row-level-security subscriber's
    /// view is a DELETE of its old row, so that the client's cache drops it.
    public static func data(_ event: Event, columns: [RealtimeColumn]) -> [UInt8] {
        let operation = event.leftView ? Operation.delete : event.operation
        var writer = JSONWriter(reservingCapacity: 256 + (event.newJSON?.bytes.count ?? 0) + (event.oldJSON?.bytes.count ?? 0))
        writer.writeRaw(UInt8(ascii: "{"))
        writer.writeKey("schema", first: true)
        writer.write(string: event.table.schema)
        writer.writeKey("table")
        writer.write(string: event.table.name)
        writer.writeKey("commit_timestamp")
        writer.write(string: commitTimestamp(event.at))
        writer.writeKey("type")
        writer.write(string: operation.rawValue)
        writer.writeKey("columns")
        writer.writeRaw(UInt8(ascii: "["))
        for (position, column) in columns.enumerated() {
            writer.writeRaw(position == 0 ? "{\"name\":" : ",{\"name\":")
            writer.write(string: column.name)
            writer.writeRaw(",\"type\":")
            writer.write(string: column.type)
            writer.writeRaw(UInt8(ascii: "}"))
        }
        writer.writeRaw(UInt8(ascii: "]"))
        if operation != .delete {
            writer.writeKey("record")
            writer.writeRow(event.newJSON, omitted: event.rowDataOmitted)
        }
        if operation != .insert {
            writer.writeKey("old_record")
            writer.writeRow(event.oldJSON, omitted: event.rowDataOmitted)
        }
        writer.writeKey("errors")
        writer.writeRaw(event.rowDataOmitted ? "[\"Error 413: Payload Too Large\"]" : "null")
        writer.writeRaw(UInt8(ascii: "}"))
        return writer.bytes
    }

    /// `{"ids":[…],"data":…}` for one channel's matching bindings.
    public static func payload(ids: [Int], data: [UInt8]) -> [UInt8] {
        var bytes = Array(#"{"ids":["#.utf8)
        bytes.reserveCapacity(data.count + 32)
        for (position, id) in ids.enumerated() {
            if position > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes += String(id).utf8
        }
        bytes += #"],"data":"#.utf8
        bytes += data
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// pgherald's `at` (microseconds) in Supabase's form: UTC, milliseconds, `Z`.
    static func commitTimestamp(_ at: String) -> String {
        guard let dot = at.firstIndex(of: ".") else {
            return at.hasSuffix("Z") ? at.dropLast() + ".000Z" : at
        }
        let fraction = at[at.index(after: dot)...].prefix { $0.isNumber }
        let milliseconds = (fraction + "000").prefix(3)
        return at[..<dot] + "." + milliseconds + "Z"
    }
}

extension JSONWriter {
    fileprivate mutating func writeRow(_ row: RawJSON?, omitted: Bool) {
        if let row, !omitted { write(raw: row) } else { writeRaw("{}") }
    }
}
