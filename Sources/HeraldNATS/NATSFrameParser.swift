import Foundation

/// Splits what a NATS server sends into operations. Pure: it is fed bytes
/// as they arrive, split anywhere, and hands back whole operations.
public struct NATSFrameParser: Sendable {
    /// The longest control line (an operation without its payload) it waits
    /// for; the server's own default limit.
    public static let maximumControlLine = 4096

    /// The largest payload it accepts, so that a broken peer cannot make it hold unbounded memory.
    public var maximumPayload: Int
    private var buffer: [UInt8] = []
    private var start = 0

    public init(maximumPayload: Int = 64 << 20) {
        self.maximumPayload = maximumPayload
    }

    /// Bytes received, in order.
    public mutating func append(_ bytes: some Sequence<UInt8>) {
        if start > 0, start >= buffer.count / 2 {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole operation, or nil until more bytes arrive.
    public mutating func next() throws(NATSProtocolError) -> NATSServerOperation? {
        guard let lineEnd = lineEnd(from: start) else {
            if buffer.count - start > Self.maximumControlLine {
                throw NATSProtocolError("a control line longer than \(Self.maximumControlLine) bytes")
            }
            return nil
        }
        let line = buffer[start..<lineEnd]
        let words = line.split(whereSeparator: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") })
        guard let first = words.first else { throw NATSProtocolError("an empty control line") }
        let operation = String(decoding: first, as: UTF8.self).uppercased()
        let arguments = words.dropFirst().map { String(decoding: $0, as: UTF8.self) }
        let afterLine = lineEnd + 2
        switch operation {
        case "PING":
            start = afterLine
            return .ping
        case "PONG":
            start = afterLine
            return .pong
        case "+OK":
            start = afterLine
            return .ok
        case "-ERR":
            start = afterLine
            let text = String(decoding: line.dropFirst(first.count), as: UTF8.self).trimmingCharacters(in: .whitespaces)
            return .error(text.hasPrefix("'") && text.hasSuffix("'") && text.count >= 2 ? String(text.dropFirst().dropLast()) : text)
        case "INFO":
            let json = line.dropFirst(first.count)
            do {
                let info = try JSONDecoder().decode(NATSServerInfo.self, from: Data(json))
                start = afterLine
                return .info(info)
            } catch {
                throw NATSProtocolError("an INFO that is not the JSON expected: \(error)")
            }
        case "MSG":
            guard arguments.count == 3 || arguments.count == 4, let size = Int(arguments[arguments.count - 1]) else {
                throw NATSProtocolError("a MSG line of the wrong shape: \(String(decoding: line, as: UTF8.self).prefix(200))")
            }
            guard let payload = try payload(at: afterLine, size: size) else { return nil }
            return .message(NATSMessage(
                subject: arguments[0], subscriptionID: arguments[1], replyTo: arguments.count == 4 ? arguments[2] : nil, payload: Array(payload)
            ))
        case "HMSG":
            guard arguments.count == 4 || arguments.count == 5, let headerSize = Int(arguments[arguments.count - 2]),
                  let totalSize = Int(arguments[arguments.count - 1]), headerSize >= 0, headerSize <= totalSize else {
                throw NATSProtocolError("an HMSG line of the wrong shape: \(String(decoding: line, as: UTF8.self).prefix(200))")
            }
            guard let body = try payload(at: afterLine, size: totalSize) else { return nil }
            let (status, headers) = try Self.headers(body.prefix(headerSize))
            return .message(NATSMessage(
                subject: arguments[0], subscriptionID: arguments[1], replyTo: arguments.count == 5 ? arguments[2] : nil,
                headers: headers, status: status, payload: Array(body.dropFirst(headerSize))
            ))
        default:
            throw NATSProtocolError("an unknown operation \(operation.prefix(40))")
        }
    }

    /// The `size` bytes at `offset` and the CRLF after them, consumed; nil until all have arrived.
    private mutating func payload(at offset: Int, size: Int) throws(NATSProtocolError) -> ArraySlice<UInt8>? {
        guard size >= 0, size <= maximumPayload else {
            throw NATSProtocolError("a payload of \(size) bytes, over the \(maximumPayload) accepted")
        }
        guard buffer.count >= offset + size + 2 else { return nil }
        guard buffer[offset + size] == UInt8(ascii: "\r"), buffer[offset + size + 1] == UInt8(ascii: "\n") else {
            throw NATSProtocolError("a payload not followed by CRLF")
        }
        start = offset + size + 2
        return buffer[offset..<(offset + size)]
    }

    private func lineEnd(from index: Int) -> Int? {
        var index = index
        while index + 1 < buffer.count {
            if buffer[index] == UInt8(ascii: "\r"), buffer[index + 1] == UInt8(ascii: "\n") { return index }
            index += 1
        }
        return nil
    }

    /// `NATS/1.0[ code[ description]]` and `Name: value` lines, ending with an empty line.
    ///
    /// Read byte by byte: an edge parses the headers of every event it takes
    /// in, and splitting and trimming them as Foundation strings took a third
    /// of its CPU.
    static func headers(_ block: ArraySlice<UInt8>) throws(NATSProtocolError) -> (status: Int?, headers: [(name: String, value: String)]) {
        let version = "NATS/1.0".utf8
        guard block.starts(with: version) else {
            throw NATSProtocolError("headers that do not start with NATS/1.0")
        }
        var status: Int?
        var headers: [(name: String, value: String)] = []
        var lineStart = block.startIndex
        var isFirst = true
        while lineStart < block.endIndex {
            let lineEnd = Self.lineEnd(in: block, from: lineStart)
            let line = block[lineStart..<lineEnd]
            if isFirst {
                // The status code, if any, is the first word after the version.
                let code = line.dropFirst(version.count).drop { $0 == UInt8(ascii: " ") }.prefix { $0 != UInt8(ascii: " ") }
                status = code.isEmpty ? nil : Int(String(decoding: code, as: UTF8.self))
                isFirst = false
            } else if !line.isEmpty {
                guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw NATSProtocolError("a header line without a colon") }
                let value = Self.trimmingBlanks(line[line.index(after: colon)...])
                headers.append((String(decoding: line[..<colon], as: UTF8.self), String(decoding: value, as: UTF8.self)))
            }
            lineStart = lineEnd == block.endIndex ? lineEnd : lineEnd + 2
        }
        return (status, headers)
    }

    /// Where the line from `start` ends: at its CR LF, or at the block's end.
    private static func lineEnd(in block: ArraySlice<UInt8>, from start: Int) -> Int {
        var index = start
        while index < block.endIndex {
            if block[index] == UInt8(ascii: "\r"), index + 1 < block.endIndex, block[index + 1] == UInt8(ascii: "\n") { return index }
            index += 1
        }
        return block.endIndex
    }

    /// Without the spaces and tabs at either end.
    private static func trimmingBlanks(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        func isBlank(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        let start = bytes.firstIndex { !isBlank($0) } ?? bytes.endIndex
        let end = bytes.lastIndex { !isBlank($0) }.map { $0 + 1 } ?? start
        return bytes[start..<max(start, end)]
    }
}
