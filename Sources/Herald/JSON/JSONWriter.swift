/// Appends compact JSON to a byte buffer.
///
/// Output goes straight into `[UInt8]` so an event is encoded once and the
/// same bytes are shared by every subscriber.
public struct JSONWriter {
    public private(set) var bytes: [UInt8]

    public init(reservingCapacity capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    public mutating func write(_ value: JSONValue) {
        switch value {
        case .null: writeRaw("null")
        case .bool(let flag): writeRaw(flag ? "true" : "false")
        case .number(let number): writeRaw(number.text)
        case .string(let string): write(string: string)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (position, element) in elements.enumerated() {
                if position > 0 { bytes.append(UInt8(ascii: ",")) }
                write(element)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let object):
            bytes.append(UInt8(ascii: "{"))
            var first = true
            for member in object {
                if !first { bytes.append(UInt8(ascii: ",")) }
                first = false
                write(string: member.key)
                bytes.append(UInt8(ascii: ":"))
                write(member.value)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// Writes `value`, or `null` when it is absent.
    public mutating func write(_ value: JSONValue?) {
        if let value { write(value) } else { writeRaw("null") }
    }

    /// Copies already-encoded JSON, or writes `null` when it is absent;
    /// returns where the copy lies in ``bytes``.
    @discardableResult
    public mutating func write(raw: RawJSON?) -> Range<Int>? {
        guard let raw else {
            writeRaw("null")
            return nil
        }
        let start = bytes.count
        bytes.append(contentsOf: raw.bytes)
        return start..<bytes.count
    }

    public mutating func write(string: String) {
        bytes.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            // Most strings need no escaping; copy those in one go.
            if !utf8.contains(where: Self.needsEscaping) {
                bytes.append(contentsOf: utf8)
                return
            }
            for byte in utf8 {
                switch byte {
                case UInt8(ascii: "\""): writeRaw("\\\"")
                case UInt8(ascii: "\\"): writeRaw("\\\\")
                case 0x0A: writeRaw("\\n")
                case 0x0D: writeRaw("\\r")
                case 0x09: writeRaw("\\t")
                case 0x08: writeRaw("\\b")
                case 0x0C: writeRaw("\\f")
                case ..<0x20:
                    writeRaw("\\u00")
                    bytes.append(Self.hexDigits[Int(byte >> 4)])
                    bytes.append(Self.hexDigits[Int(byte & 0x0F)])
                default: bytes.append(byte)
                }
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static func needsEscaping(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    /// Writes the start of an object member: the separator when needed, the key and the colon.
    public mutating func writeKey(_ key: StaticString, first: Bool = false) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        key.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// Appends text that is already valid JSON.
    public mutating func writeRaw(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }

    public mutating func writeRaw(_ byte: UInt8) {
        bytes.append(byte)
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
}

extension JSONValue {
    /// The value as compact JSON text.
    public var jsonText: String {
        var writer = JSONWriter()
        writer.write(self)
        return String(decoding: writer.bytes, as: UTF8.self)
    }
}

extension JSONObject {
    /// The object as compact JSON text, members in their original order.
    public var jsonText: String { JSONValue.object(self).jsonText }
}
