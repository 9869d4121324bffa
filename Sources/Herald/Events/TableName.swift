/// A schema-qualified table name.
public struct TableName: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var schema: String
    public var name: String

    public init(schema: String = "public", name: String) {
        self.schema = schema
        self.name = name
    }

    /// Parses `schema.table`, or a bare `table` meaning `public`.
    ///
    /// Names are taken literally (as PostgreSQL reports them in `TG_TABLE_NAME`),
    /// so a table whose name contains a dot must be given with its schema.
    public init?(parsing text: some StringProtocol) {
        guard !text.isEmpty else { return nil }
        if let dot = text.firstIndex(of: ".") {
            let schema = text[..<dot]
            let name = text[text.index(after: dot)...]
            guard !schema.isEmpty, !name.isEmpty else { return nil }
            self.init(schema: String(schema), name: String(name))
        } else {
            self.init(name: String(text))
        }
    }

    public var description: String { "\(schema).\(name)" }

    public static func < (lhs: TableName, rhs: TableName) -> Bool {
        (lhs.schema, lhs.name) < (rhs.schema, rhs.name)
    }
}
