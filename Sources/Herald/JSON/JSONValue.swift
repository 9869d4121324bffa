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

    public var arrayValue: [JSONValue]? {
        if case .array(let array) = self { return array }
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

    /// One array for keys and values: one allocation per object.
    private var members: [Member]

    public init() {
        members = []
    }

    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init()
        for (key, value) in elements { self[key] = value }
    }

    public var count: Int { members.count }

    public var isEmpty: Bool { members.isEmpty }

    public var keys: [String] { members.map(\.key) }

    /// The value of the first member named `key`, byte for byte (two names that only look alike
    /// are two columns to PostgreSQL); setting appends or replaces it.
    public subscript(key: String) -> JSONValue? {
        get { members.first { $0.key.hasSameBytes(as: key) }?.value }
        set {
            if let index = members.firstIndex(where: { $0.key.hasSameBytes(as: key) }) {
                if let newValue {
                    members[index].value = newValue
                } else {
                    members.remove(at: index)
                }
            } else if let newValue {
                members.append((key, newValue))
            }
        }
    }

    /// Appends a member without checking for an existing one of the same name.
    mutating func append(key: String, value: JSONValue) {
        members.append((key, value))
    }

    public func makeIterator() -> IndexingIterator<[Member]> {
        members.makeIterator()
    }

    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        lhs.members.elementsEqual(rhs.members) { $0.key == $1.key && $0.value == $1.value }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(members.count)
        for member in members {
            hasher.combine(member.key)
            hasher.combine(member.value)
        }
    }
}
