import Herald
import NIOCore

/// How `/events` frames events.
public enum StreamFormat: String, Sendable, CaseIterable {
    /// Server-Sent Events: `id:` event id, `event:` op, `data:` the event JSON.
    case sse
    /// One event JSON object per line.
    case ndjson

    public var contentType: String {
        switch self {
        case .sse: return "text/event-stream; charset=utf-8"
        case .ndjson: return "application/x-ndjson"
        }
    }

    /// Appends events, framed, to one buffer so a batch goes out in one write.
    func append(_ events: [Event], to buffer: inout ByteBuffer) {
        for event in events {
            let json = event.jsonBytes
            switch self {
            case .sse:
                buffer.writeStaticString("id: ")
                buffer.writeString(event.id)
                buffer.writeStaticString("\nevent: ")
                buffer.writeString(event.operation.rawValue)
                buffer.writeStaticString("\ndata: ")
                buffer.writeBytes(json)
                buffer.writeStaticString("\n\n")
            case .ndjson:
                buffer.writeBytes(json)
                buffer.writeStaticString("\n")
            }
        }
    }

    /// Keeps an idle stream (and proxies in between) alive. SSE clients
    /// ignore comments; NDJSON readers skip blank lines.
    var heartbeat: StaticString {
        switch self {
        case .sse: return ": heartbeat\n\n"
        case .ndjson: return "\n"
        }
    }

    /// The first frame for a client whose resume position is unknown: it must refetch everything.
    func resetFrame(reason: String) -> String {
        var writer = JSONWriter()
        writer.write(.object(["error": .string("reset"), "message": .string(reason + "; refetch everything")]))
        let data = String(decoding: writer.bytes, as: UTF8.self)
        switch self {
        case .sse: return "event: reset\ndata: \(data)\n\n"
        case .ndjson: return data + "\n"
        }
    }

    /// The last frame of a stream whose subscriber fell too far behind.
    func overflowFrame(capacity: Int) -> String {
        let data = #"{"error":"overflow","capacity":\#(capacity),"message":"fell more than \#(capacity) events behind; reconnect and refetch"}"#
        switch self {
        case .sse: return "event: overflow\ndata: \(data)\n\n"
        case .ndjson: return data + "\n"
        }
    }
}
