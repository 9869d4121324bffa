/// A schema-qualified table name.
public struct TableName: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var schema: String
    public var name: String

    public init(schema: String = "public", name: String) {
        self.schema = schema
        self.name = name
    }

    public var description: String { "\(schema).\(name)" }

    // Byte for byte, as PostgreSQL tells names apart: `café` with one character and with a
    // combining accent are two tables, which String equality would take for one (and a grant of
    // one for a grant of both).
    public static func == (lhs: TableName, rhs: TableName) -> Bool {
        lhs.schema.hasSameBytes(as: rhs.schema) && lhs.name.hasSameBytes(as: rhs.name)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(exactly: schema)
        hasher.combine(exactly: name)
    }

    public static func < (lhs: TableName, rhs: TableName) -> Bool {
        (lhs.schema, lhs.name) < (rhs.schema, rhs.name)
    }
}
