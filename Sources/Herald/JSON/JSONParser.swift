/// Why a byte sequence is not acceptable JSON.
public struct JSONParsingError: Error, Hashable, CustomStringConvertible {
    /// Byte offset at which parsing stopped.
    public var offset: Int
    public var reason: String

    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

/// A strict RFC 8259 parser over UTF-8 bytes.
///
/// Hostile input is expected (anyone may `NOTIFY pgherald`), so nesting depth
/// is capped and every error is reported rather than trapped.
public struct JSONParser: ~Copyable {
    /// Nesting deeper than this is rejected, so crafted input cannot exhaust the stack.
    public static let maximumDepth = 256

    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    private var depth = 0
    /// Whitespace was skipped since this was last cleared: a copied value needs compacting.
    private var sawWhitespace = false

    init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    /// Parses one complete JSON document; trailing non-whitespace is an error.
    public static func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws(JSONParsingError) -> JSONValue {
        var parser = JSONParser(bytes: bytes)
        parser.skipWhitespace()
        let value = try parser.parseValue()
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw parser.error("unexpected data after the document") }
        return value
    }

    public static func parse(_ text: String) throws(JSONParsingError) -> JSONValue {
        var text = text
        let result: Result<JSONValue, JSONParsingError> = text.withUTF8 { buffer in
            Result { () throws(JSONParsingError) in try parse(buffer) }
        }
        return try result.get()
    }

    public static func parse(_ bytes: [UInt8]) throws(JSONParsingError) -> JSONValue {
        let result: Result<JSONValue, JSONParsingError> = bytes.withUnsafeBufferPointer { buffer in
            Result { () throws(JSONParsingError) in try parse(buffer) }
        }
        return try result.get()
    }

    func error(_ reason: String) -> JSONParsingError {
        JSONParsingError(offset: index, reason: reason)
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
                index += 1
                sawWhitespace = true
            default: return
            }
        }
    }

    mutating func parseValue() throws(JSONParsingError) -> JSONValue {
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw error("unexpected character")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParsingError) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw error("unexpected end of input") }
        let matches = literal.withUTF8Buffer { expected in
            expected.elementsEqual(bytes[index..<(index + count)])
        }
        guard matches else { throw error("invalid literal") }
        index += count
    }

    mutating func enterContainer() throws(JSONParsingError) {
        depth += 1
        guard depth <= Self.maximumDepth else { throw error("nesting deeper than \(Self.maximumDepth)") }
        index += 1
        skipWhitespace()
    }

    private mutating func parseObject() throws(JSONParsingError) -> JSONValue {
        try enterContainer()
        defer { depth -= 1 }
        var object = JSONObject()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(object)
        }
        while true {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a member name") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            skipWhitespace()
            object.append(key: key, value: try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw error("unterminated object") }
            switch bytes[index] {
            case UInt8(ascii: ","):
                index += 1
                skipWhitespace()
            case UInt8(ascii: "}"):
                index += 1
                return .object(object)
            default:
                throw error("expected ',' or '}'")
            }
        }
    }

    private mutating func parseArray() throws(JSONParsingError) -> JSONValue {
        try enterContainer()
        defer { depth -= 1 }
        var elements: [JSONValue] = []
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            elements.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw error("unterminated array") }
            switch bytes[index] {
            case UInt8(ascii: ","):
                index += 1
                skipWhitespace()
            case UInt8(ascii: "]"):
                index += 1
                return .array(elements)
            default:
                throw error("expected ',' or ']'")
            }
        }
    }

    private mutating func parseNumber() throws(JSONParsingError) -> JSONNumber {
        let start = index
        try scanNumber()
        return JSONNumber(validatedText: String(decoding: bytes[start..<index], as: UTF8.self))
    }

    private mutating func scanNumber() throws(JSONParsingError) {
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw error("expected a digit") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            skipDigits()
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("expected a digit after '.'") }
            skipDigits()
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("expected a digit in the exponent") }
            skipDigits()
        }
    }

    private func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    private mutating func skipDigits() {
        while index < bytes.count, isDigit(bytes[index]) { index += 1 }
    }

    mutating func parseString() throws(JSONParsingError) -> String {
        index += 1  // opening quote
        let start = index
        // Fast path: most strings hold no escapes and can be decoded in place.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let string = String(decoding: bytes[start..<index], as: UTF8.self)
                index += 1
                return string
            }
            if byte == UInt8(ascii: "\\") { break }
            guard byte >= 0x20 else { throw error("control character in string") }
            index += 1
        }
        var decoded = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return String(decoding: decoded, as: UTF8.self)
            case UInt8(ascii: "\\"):
                index += 1
                try parseEscape(into: &decoded)
            case ..<0x20:
                throw error("control character in string")
            default:
                decoded.append(byte)
                index += 1
            }
        }
        throw error("unterminated string")
    }

    private mutating func parseEscape(into decoded: inout [UInt8]) throws(JSONParsingError) {
        guard index < bytes.count else { throw error("unterminated escape") }
        let escaped = bytes[index]
        index += 1
        switch escaped {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(escaped)
        case UInt8(ascii: "b"): decoded.append(0x08)
        case UInt8(ascii: "f"): decoded.append(0x0C)
        case UInt8(ascii: "n"): decoded.append(0x0A)
        case UInt8(ascii: "r"): decoded.append(0x0D)
        case UInt8(ascii: "t"): decoded.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try parseHexQuad()
            if (0xD800...0xDBFF).contains(scalar) {
                guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                    throw error("unpaired surrogate")
                }
                index += 2
                let low = try parseHexQuad()
                guard (0xDC00...0xDFFF).contains(low) else { throw error("unpaired surrogate") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(scalar) {
                throw error("unpaired surrogate")
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw error("invalid unicode escape") }
            decoded.append(contentsOf: UTF8.encode(unicode)!)
        default:
            throw error("invalid escape")
        }
    }

    /// A member value read without building a tree below it.
    enum ShallowValue {
        case null
        case bool(Bool)
        case string(String)
        case object(RawJSON)
        /// An array or a number.
        case other(RawJSON)
    }

    /// Reads a top-level object member by member: `body` gets each member's
    /// name, as UTF-8 with its escapes decoded, and reads its value from the
    /// parser with ``readShallowValue()``. No name is copied, as this runs
    /// for every event.
    ///
    /// Returns false when the document is valid JSON but not an object.
    static func readMembers(
        _ bytes: UnsafeBufferPointer<UInt8>,
        _ body: (UnsafeBufferPointer<UInt8>, inout JSONParser) throws(JSONParsingError) -> Void
    ) throws(JSONParsingError) -> Bool {
        var parser = JSONParser(bytes: bytes)
        parser.skipWhitespace()
        guard parser.index < bytes.count, bytes[parser.index] == UInt8(ascii: "{") else {
            _ = try parse(bytes)
            return false
        }
        try parser.enterContainer()
        if parser.index < bytes.count, bytes[parser.index] == UInt8(ascii: "}") {
            parser.index += 1
        } else {
            while true {
                guard parser.index < bytes.count, bytes[parser.index] == UInt8(ascii: "\"") else {
                    throw parser.error("expected a member name")
                }
                let nameStart = parser.index + 1
                try parser.skipString()
                let name = UnsafeBufferPointer(rebasing: bytes[nameStart..<(parser.index - 1)])
                parser.skipWhitespace()
                guard parser.index < bytes.count, bytes[parser.index] == UInt8(ascii: ":") else { throw parser.error("expected ':'") }
                parser.index += 1
                parser.skipWhitespace()
                if name.contains(UInt8(ascii: "\\")) {
                    // A name with escapes, which pgherald never writes: decoded for the comparison.
                    var nameParser = JSONParser(bytes: UnsafeBufferPointer(rebasing: bytes[(nameStart - 1)...]))
                    var decoded = try nameParser.parseString()
                    let result: Result<Void, JSONParsingError> = decoded.withUTF8 { name in
                        Result { () throws(JSONParsingError) in try body(name, &parser) }
                    }
                    try result.get()
                } else {
                    try body(name, &parser)
                }
                parser.skipWhitespace()
                guard parser.index < bytes.count else { throw parser.error("unterminated object") }
                if bytes[parser.index] == UInt8(ascii: ",") {
                    parser.index += 1
                    parser.skipWhitespace()
                } else if bytes[parser.index] == UInt8(ascii: "}") {
                    parser.index += 1
                    break
                } else {
                    throw parser.error("expected ',' or '}'")
                }
            }
        }
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw parser.error("unexpected data after the document") }
        return true
    }

    /// Reads one value; strings are decoded, containers and numbers kept as raw JSON.
    mutating func readShallowValue() throws(JSONParsingError) -> ShallowValue {
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case let first:
            var output: [UInt8] = []
            try copyValue(into: &output)
            let raw = RawJSON(validatedBytes: output.compacted[...])
            return first == UInt8(ascii: "{") ? .object(raw) : .other(raw)
        }
    }

    /// A member value where an event's row belongs.
    enum RowValue {
        case null
        /// An object, copied compactly to this range of the buffer.
        case object(Range<Int>)
        /// Any other value, validated.
        case notAnObject
    }

    /// Reads an object or null, copying an object to the end of `buffer`:
    /// the rows of one event share one allocation.
    mutating func readRowValue(appendingTo buffer: inout [UInt8]) throws(JSONParsingError) -> RowValue {
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "{"):
            // What is left of the document holds every row still to come.
            if buffer.capacity == 0 { buffer.reserveCapacity(bytes.count - index) }
            let start = buffer.count
            try copyValue(into: &buffer)
            return .object(start..<buffer.count)
        default:
            try skipValue()
            return .notAnObject
        }
    }

    /// Validates one value and appends it to `output` without insignificant
    /// whitespace; escapes inside strings are kept as written. Validation
    /// comes first, then one copy of the whole value: what PostgreSQL writes
    /// is compact already, and byte-by-byte appends cost more than the checks.
    mutating func copyValue(into output: inout [UInt8]) throws(JSONParsingError) {
        let start = index
        let spacedBefore = sawWhitespace
        sawWhitespace = false
        try skipValue()
        let value = UnsafeBufferPointer(rebasing: bytes[start..<index])
        if sawWhitespace {
            Self.appendCompacting(value, to: &output)
        } else if output.capacity == 0 {
            output = Array(value)
        } else {
            output.append(contentsOf: value)
        }
        sawWhitespace = sawWhitespace || spacedBefore
    }

    /// Appends validated JSON without the whitespace outside its strings.
    private static func appendCompacting(_ value: UnsafeBufferPointer<UInt8>, to output: inout [UInt8]) {
        output.reserveCapacity(output.count + value.count)
        var inString = false
        var escaped = false
        for byte in value {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
            } else {
                switch byte {
                case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"): continue
                case UInt8(ascii: "\""): inString = true
                default: break
                }
            }
            output.append(byte)
        }
    }

    /// Validates one value and moves past it.
    private mutating func skipValue() throws(JSONParsingError) {
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): try skipContainer(close: UInt8(ascii: "}"), keyed: true)
        case UInt8(ascii: "["): try skipContainer(close: UInt8(ascii: "]"), keyed: false)
        case UInt8(ascii: "\""): try skipString()
        case UInt8(ascii: "t"): try expectLiteral("true")
        case UInt8(ascii: "f"): try expectLiteral("false")
        case UInt8(ascii: "n"): try expectLiteral("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try scanNumber()
        default: throw error("unexpected character")
        }
    }

    private mutating func skipContainer(close: UInt8, keyed: Bool) throws(JSONParsingError) {
        try enterContainer()
        defer { depth -= 1 }
        if index < bytes.count, bytes[index] == close {
            index += 1
            return
        }
        while true {
            if keyed {
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a member name") }
                try skipString()
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
                index += 1
                skipWhitespace()
            }
            try skipValue()
            skipWhitespace()
            guard index < bytes.count else { throw error("unterminated container") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                skipWhitespace()
            } else if bytes[index] == close {
                index += 1
                return
            } else {
                throw error(keyed ? "expected ',' or '}'" : "expected ',' or ']'")
            }
        }
    }

    private mutating func skipString() throws(JSONParsingError) {
        index += 1
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                return
            }
            if byte == UInt8(ascii: "\\") {
                index += 1
                var discarded: [UInt8] = []
                try parseEscape(into: &discarded)
                continue
            }
            guard byte >= 0x20 else { throw error("control character in string") }
            index += 1
        }
        throw error("unterminated string")
    }

    private mutating func parseHexQuad() throws(JSONParsingError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("truncated unicode escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("invalid hex digit in unicode escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }
}
