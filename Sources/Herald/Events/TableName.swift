/// A schema-qualified table name.
public struct TableName: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var schema: String
    public var name: String

    public init(schema: String = "public", name: String) {
        self.schema = schema
        self.name = name
    }

    public var description: String { "\(schema).\(name)" }

    public static func < (lhs: TableName, rhs: TableName) -> Bool {
        (lhs.schema, lhs.name) < (rhs.schema, rhs.name)
    }
}
