/// The compact text of one validated JSON value.
///
/// Events keep row data this way: outputs copy the bytes as they are, and
/// the tree (`value`) is built only for consumers that look inside.
public struct RawJSON: Sendable, Hashable, CustomStringConvertible {
    public let bytes: [UInt8]

    /// Validates `bytes` as one JSON document and stores it without insignificant whitespace.
    public init(validating bytes: UnsafeBufferPointer<UInt8>) throws(JSONParsingError) {
        var parser = JSONParser(bytes: bytes)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        parser.skipWhitespace()
        try parser.copyValue(into: &output)
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw parser.error("unexpected data after the document") }
        self.bytes = output
    }

    /// Encodes a value.
    public init(_ value: JSONValue) {
        var writer = JSONWriter()
        writer.write(value)
        bytes = writer.bytes.compacted
    }

    /// Wraps bytes the caller has already validated and minified.
    init(validatedBytes: [UInt8]) {
        bytes = validatedBytes
    }

    /// The parsed value. The bytes were validated, so parsing cannot fail.
    public var value: JSONValue {
        (try? JSONParser.parse(bytes)) ?? .null
    }

    public var description: String { String(decoding: bytes, as: UTF8.self) }
}
