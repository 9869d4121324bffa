/// The compact text of one validated JSON value.
///
/// Events keep row data this way: outputs copy the bytes as they are, and
/// the tree (`value`) is built only for consumers that look inside.
public struct RawJSON: Sendable, Hashable, CustomStringConvertible {
    /// The value's compact text. It may be part of a larger buffer that it
    /// shares, such as the event's encoded JSON that holds it, so that an
    /// event keeps one allocation for its rows and its JSON.
    public let bytes: ArraySlice<UInt8>

    /// Validates `bytes` as one JSON document and stores it without insignificant whitespace.
    public init(validating bytes: UnsafeBufferPointer<UInt8>) throws(JSONParsingError) {
        var parser = JSONParser(bytes: bytes)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        parser.skipWhitespace()
        try parser.copyValue(into: &output)
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw parser.error("unexpected data after the document") }
        self.bytes = output[...]
    }

    /// Encodes a value.
    public init(_ value: JSONValue) {
        var writer = JSONWriter()
        writer.write(value)
        bytes = writer.bytes.compacted[...]
    }

    /// Wraps bytes the caller has already validated and minified.
    init(validatedBytes: ArraySlice<UInt8>) {
        bytes = validatedBytes
    }

    /// The parsed value. The bytes were validated, so parsing cannot fail.
    public var value: JSONValue {
        let parsed: JSONValue? = bytes.withUnsafeBufferPointer { try? JSONParser.parse($0) }
        return parsed ?? .null
    }

    public var description: String { String(decoding: bytes, as: UTF8.self) }
}
