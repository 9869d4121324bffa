import Herald
import HeraldHTTP
import NIOCore

/// How `GET /queries/NAME` frames a live query's updates.
///
/// Every frame's JSON has `type` (`result` or `diff`), `id` (the resume
/// token), `query`, `version`, `snapshot` (what the rows include) and
/// `txid` (the newest transaction among the changes, when known). A
/// `result` has `key` (the key columns) and `rows`; a `diff` has `added`, `changed` and `removed`, the
/// last as objects of the key columns. In SSE, `id:` and `event:` repeat
/// `id` and `type`.
enum LiveQueryFrame {
    /// The update as one frame; nil for an unchanged result, which sends nothing.
    static func frame(_ update: LiveQueryUpdate, key: [String], format: StreamFormat, allocator: ByteBufferAllocator) -> ByteBuffer? {
        let result = update.result
        var writer = JSONWriter(reservingCapacity: 256 + result.rows.count * 64)
        let type: String
        if let difference = update.difference {
            if difference.isEmpty { return nil }
            type = "diff"
            writeHead(type, update, into: &writer)
            writer.writeRaw(",\"added\":")
            writeRows(difference.added, into: &writer)
            writer.writeRaw(",\"changed\":")
            writeRows(difference.changed, into: &writer)
            writer.writeRaw(",\"removed\":[")
            for (index, removed) in difference.removed.enumerated() {
                if index > 0 { writer.writeRaw(",") }
                var object = JSONObject()
                if case .array(let values) = removed.value {
                    for (column, value) in zip(key, values) { object[column] = value }
                }
                writer.write(.object(object))
            }
            writer.writeRaw("]}")
        } else {
            type = "result"
            writeHead(type, update, into: &writer)
            writer.writeRaw(",\"key\":")
            writer.write(.array(key.map { .string($0) }))
            writer.writeRaw(",\"rows\":")
            writeRows(result.rows, into: &writer)
            writer.writeRaw("}")
        }
        var buffer = allocator.buffer(capacity: writer.bytes.count + 64)
        switch format {
        case .sse:
            buffer.writeString("id: \(result.token)\nevent: \(type)\ndata: ")
            buffer.writeBytes(writer.bytes)
            buffer.writeStaticString("\n\n")
        case .ndjson:
            buffer.writeBytes(writer.bytes)
            buffer.writeStaticString("\n")
        }
        return buffer
    }

    /// The last frame of a stream whose query failed.
    static func errorFrame(_ error: LiveQueryError, format: StreamFormat) -> String {
        let data = JSONValue.object(["type": .string("error"), "error": .string(error.code.rawValue), "message": .string(error.message)]).jsonText
        switch format {
        case .sse: return "event: error\ndata: \(data)\n\n"
        case .ndjson: return data + "\n"
        }
    }

    private static func writeHead(_ type: String, _ update: LiveQueryUpdate, into writer: inout JSONWriter) {
        let result = update.result
        writer.writeRaw("{\"type\":\"\(type)\",\"id\":")
        writer.write(string: result.token)
        writer.writeRaw(",\"query\":")
        writer.write(string: result.query)
        writer.writeRaw(",\"version\":\(result.version),\"snapshot\":")
        writer.write(string: result.snapshot.description)
        writer.writeRaw(",\"txid\":")
        if let transactionID = update.transactionID { writer.write(string: String(transactionID)) } else { writer.writeRaw("null") }
    }

    private static func writeRows(_ rows: [RawJSON], into writer: inout JSONWriter) {
        writer.writeRaw("[")
        for (index, row) in rows.enumerated() {
            if index > 0 { writer.writeRaw(",") }
            writer.write(raw: row)
        }
        writer.writeRaw("]")
    }
}
