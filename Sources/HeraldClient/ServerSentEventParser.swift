/// One message of a Server-Sent Events stream.
public struct ServerSentEvent: Sendable, Hashable {
    public var id: String?
    /// The `event:` field; `message` when absent.
    public var type: String
    public var data: String
}

/// Splits a byte stream into Server-Sent Events, as the HTML standard
/// describes: `\n`, `\r\n` or `\r` end lines, comments start with `:`, and
/// several `data:` lines join with newlines.
public struct ServerSentEventParser: Sendable {
    /// Messages larger than this are refused, so a broken peer cannot exhaust memory.
    public static let maximumMessageSize = 16 << 20

    private var line: [UInt8] = []
    private var lastByteWasCarriageReturn = false
    private var id: String?
    private var type: String?
    private var data: [UInt8] = []
    private var hasData = false

    public init() {}

    /// A message grew past ``maximumMessageSize``.
    public struct MessageTooLarge: Error, CustomStringConvertible {
        public var description: String { "a server-sent event exceeded \(ServerSentEventParser.maximumMessageSize) bytes" }
    }

    /// Feeds bytes; returns the messages they complete.
    public mutating func feed(_ bytes: some Sequence<UInt8>) throws(MessageTooLarge) -> [ServerSentEvent] {
        var messages: [ServerSentEvent] = []
        for byte in bytes {
            if lastByteWasCarriageReturn {
                lastByteWasCarriageReturn = false
                if byte == UInt8(ascii: "\n") { continue }
            }
            switch byte {
            case UInt8(ascii: "\n"):
                if let message = endLine() { messages.append(message) }
            case UInt8(ascii: "\r"):
                lastByteWasCarriageReturn = true
                if let message = endLine() { messages.append(message) }
            default:
                line.append(byte)
                guard line.count + data.count <= Self.maximumMessageSize else { throw MessageTooLarge() }
            }
        }
        return messages
    }

    private mutating func endLine() -> ServerSentEvent? {
        defer { line.removeAll(keepingCapacity: true) }
        if line.isEmpty {
            defer {
                type = nil
                data.removeAll(keepingCapacity: true)
                hasData = false
            }
            guard hasData else { return nil }
            return ServerSentEvent(id: id, type: type ?? "message", data: String(decoding: data, as: UTF8.self))
        }
        if line.first == UInt8(ascii: ":") { return nil }
        let colon = line.firstIndex(of: UInt8(ascii: ":")) ?? line.endIndex
        let field = String(decoding: line[..<colon], as: UTF8.self)
        var valueStart = colon < line.endIndex ? colon + 1 : colon
        if valueStart < line.endIndex, line[valueStart] == UInt8(ascii: " ") { valueStart += 1 }
        let value = line[valueStart...]
        switch field {
        case "data":
            if hasData { data.append(UInt8(ascii: "\n")) }
            data.append(contentsOf: value)
            hasData = true
        case "event":
            type = String(decoding: value, as: UTF8.self)
        case "id" where !value.contains(0):
            id = String(decoding: value, as: UTF8.self)
        default:
            break
        }
        return nil
    }
}
