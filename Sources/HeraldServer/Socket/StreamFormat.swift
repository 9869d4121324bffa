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

    /// The events framed in one buffer, so that a batch goes out in one write.
    func frames(_ events: some Collection<Event>, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: byteCount(of: events))
        append(events, to: &buffer)
        return buffer
    }

    /// The size of the events, framed.
    func byteCount(of events: some Collection<Event>) -> Int {
        switch self {
        case .sse: return events.reduce(0) { $0 + $1.serverSentEventFrame.count }
        case .ndjson: return events.reduce(events.count) { $0 + $1.jsonBytes.count }
        }
    }

    func append(_ events: some Collection<Event>, to buffer: inout ByteBuffer) {
        switch self {
        case .sse:
            for event in events { buffer.writeBytes(event.serverSentEventFrame) }
        case .ndjson:
            for event in events {
                buffer.writeBytes(event.jsonBytes)
                buffer.writeInteger(UInt8(ascii: "\n"))
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
