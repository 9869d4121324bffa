/// A JSON value as PostgreSQL produced it.
///
/// Objects keep their key order (the table's column order) and numbers keep
/// their exact text, so a `numeric(40,20)` or `bigint` column survives the
/// round trip from trigger to subscriber unchanged.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// The member named `key` when this is an object, else `nil`.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let object) = self else { return nil }
        return object[key]
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    public var stringValue: String? {
        if case .string(let string) = self { return string }
        return nil
    }

    public var objectValue: JSONObject? {
        if case .object(let object) = self { return object }
        return nil
    }
}

/// A JSON number, kept as the exact text it was written with.
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible {
    /// The number's literal text, already validated against the JSON grammar.
    public let text: String

    /// Creates a number from text the caller has validated; use the integer
    /// and floating-point initialisers otherwise.
    init(validatedText: String) { self.text = validatedText }

    public init(_ value: Int64) { self.text = String(value) }

    public var int64Value: Int64? { Int64(text) }

    public var doubleValue: Double? { Double(text) }

    public var description: String { text }
}

/// A JSON object whose members keep the order they were written in.
///
/// Rows are small, so lookups scan linearly; this beats hashing for the
/// handful of columns a row usually has.
public struct JSONObject: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    public typealias Member = (key: String, value: JSONValue)

    public private(set) var keys: [String]
    public private(set) var values: [JSONValue]

    public init() {
        keys = []
        values = []
    }

    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init()
        for (key, value) in elements { self[key] = value }
    }

    public var count: Int { keys.count }

    public var isEmpty: Bool { keys.isEmpty }

    /// The value of the first member named `key`; setting appends or replaces it.
    public subscript(key: String) -> JSONValue? {
        get {
            guard let index = keys.firstIndex(of: key) else { return nil }
            return values[index]
        }
        set {
            if let index = keys.firstIndex(of: key) {
                if let newValue {
                    values[index] = newValue
                } else {
                    keys.remove(at: index)
                    values.remove(at: index)
                }
            } else if let newValue {
                keys.append(key)
                values.append(newValue)
            }
        }
    }

    /// Appends a member without checking for an existing one of the same name.
    mutating func append(key: String, value: JSONValue) {
        keys.append(key)
        values.append(value)
    }

    public func makeIterator() -> some IteratorProtocol<Member> {
        zip(keys, values).lazy.map { (key: $0.0, value: $0.1) }.makeIterator()
    }
}
