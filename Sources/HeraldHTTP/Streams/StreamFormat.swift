package import Herald
package import NIOCore

/// How `/events` frames events.
public enum StreamFormat: String, Sendable, CaseIterable {
    /// Server-Sent Events: `id:` event id, `event:` op, `data:` the event JSON.
    /// With `group=transaction`: `id:` the last event's id, `event: transaction`,
    /// `data:` the transaction's JSON.
    case sse
    /// One event JSON object per line; with `group=transaction`, one transaction per line.
    case ndjson

    public var contentType: String {
        switch self {
        case .sse: return "text/event-stream; charset=utf-8"
        case .ndjson: return "application/x-ndjson"
        }
    }

    /// The events framed in one buffer, so that a batch goes out in one write.
    ///
    /// With `asHTTPChunk`, the buffer is also one HTTP/1.1 chunk (size, data,
    /// CRLF), for ``DirectChunkWriter``.
    package func frames(_ events: [Event], allocator: ByteBufferAllocator, asHTTPChunk: Bool = false) -> ByteBuffer {
        // Each event's JSON is looked up once: one replayed from the journal is encoded here.
        let encoded = events.map(\.jsonBytes)
        var size = 0
        switch self {
        case .sse:
            for (event, json) in zip(events, encoded) {
                size += json.count + event.id.utf8.count + event.operation.rawValue.utf8.count + Self.serverSentEventLines
            }
        case .ndjson:
            size = encoded.reduce(encoded.count) { $0 + $1.count }
        }
        var buffer = Self.chunk(of: size, allocator: allocator, asHTTPChunk: asHTTPChunk)
        for (event, json) in zip(events, encoded) {
            switch self {
            case .sse:
                // The lines of Event.serverSentEventFrame, written in place rather than kept with each event.
                buffer.writeStaticString("id: ")
                buffer.writeString(event.id)
                buffer.writeStaticString("\nevent: ")
                buffer.writeString(event.operation.rawValue)
                buffer.writeStaticString("\ndata: ")
                buffer.writeBytes(json)
                buffer.writeStaticString("\n\n")
            case .ndjson:
                buffer.writeBytes(json)
                buffer.writeInteger(UInt8(ascii: "\n"))
            }
        }
        if asHTTPChunk { buffer.writeStaticString("\r\n") }
        return buffer
    }

    /// `id: `, `\nevent: `, `\ndata: ` and the blank line: an SSE frame's bytes besides its id, op and JSON.
    private static let serverSentEventLines = 21

    /// Whole transactions (`group=transaction`), one frame each.
    package func frames(_ groups: [TransactionGroup], allocator: ByteBufferAllocator, asHTTPChunk: Bool = false) -> ByteBuffer {
        let encoded = groups.map { self == .sse ? $0.serverSentEventFrame : $0.jsonBytes }
        let size = encoded.reduce(self == .ndjson ? encoded.count : 0) { $0 + $1.count }
        var buffer = Self.chunk(of: size, allocator: allocator, asHTTPChunk: asHTTPChunk)
        for bytes in encoded {
            buffer.writeBytes(bytes)
            if self == .ndjson { buffer.writeInteger(UInt8(ascii: "\n")) }
        }
        if asHTTPChunk { buffer.writeStaticString("\r\n") }
        return buffer
    }

    /// A buffer for `size` bytes of frames; with `asHTTPChunk`, the chunk's size line is written first.
    private static func chunk(of size: Int, allocator: ByteBufferAllocator, asHTTPChunk: Bool) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: size + (asHTTPChunk ? 20 : 0))
        if asHTTPChunk {
            writeHexadecimal(size, to: &buffer)
            buffer.writeStaticString("\r\n")
        }
        return buffer
    }

    /// `value`'s lowercase hexadecimal digits, without the String that `String(_:radix:)` allocates on every write.
    private static func writeHexadecimal(_ value: Int, to buffer: inout ByteBuffer) {
        let digits = max(1, (Int.bitWidth - value.leadingZeroBitCount + 3) / 4)
        for shift in stride(from: (digits - 1) * 4, through: 0, by: -4) {
            let digit = UInt8((value >> shift) & 0xF)
            buffer.writeInteger(digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10)
        }
    }

    /// Keeps an idle stream (and proxies in between) alive. SSE clients
    /// ignore comments; NDJSON readers skip blank lines.
    package var heartbeat: StaticString {
        switch self {
        case .sse: return ": heartbeat\n\n"
        case .ndjson: return "\n"
        }
    }

    /// The first frame for a client whose resume position is unknown: it must refetch everything.
    package func resetFrame(reason: String) -> String {
        errorFrame("reset", message: reason + "; refetch everything")
    }

    /// The last frame of a stream whose access grant changed on a reload:
    /// reconnecting (with `Last-Event-ID`) gets the new grant, or 403.
    package func revokedFrame(reason: String) -> String {
        errorFrame("revoked", message: reason + "; reconnect to continue under the new grant")
    }

    /// The last frame of a stream whose token expired.
    package func tokenExpiredFrame(reason: String) -> String {
        errorFrame("token_expired", message: reason + "; reconnect with a fresh token (with Last-Event-ID) to go on")
    }

    /// The last frame of a stream whose row-level security checks stopped: it resumes from the journal.
    package func interruptedFrame(reason: String) -> String {
        errorFrame("interrupted", message: reason + "; reconnect with Last-Event-ID to resume from the journal")
    }

    private func errorFrame(_ error: String, message: String) -> String {
        var writer = JSONWriter()
        writer.write(.object(["error": .string(error), "message": .string(message)]))
        let data = String(decoding: writer.bytes, as: UTF8.self)
        switch self {
        case .sse: return "event: \(error)\ndata: \(data)\n\n"
        case .ndjson: return data + "\n"
        }
    }

    /// The last frame of a stream whose subscriber fell too far behind: more
    /// than its mailbox's `capacity` while a journal replay was still
    /// covering it, or, with `historyBytes`, behind the broker's history of
    /// that many events or bytes, whichever it holds fewer of.
    package func overflowFrame(capacity: Int, historyBytes: Int? = nil) -> String {
        let data = if let historyBytes {
            #"{"error":"overflow","capacity":\#(capacity),"message":"fell behind the daemon's history of \#(capacity) events or \#(historyBytes >> 20) MiB; reconnect with Last-Event-ID to resume from the journal, or refetch"}"#
        } else {
            #"{"error":"overflow","capacity":\#(capacity),"message":"fell more than \#(capacity) events behind; reconnect and refetch"}"#
        }
        switch self {
        case .sse: return "event: overflow\ndata: \(data)\n\n"
        case .ndjson: return data + "\n"
        }
    }
}
