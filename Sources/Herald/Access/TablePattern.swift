/// The tables an access rule covers: `schema.table`, either part a
/// ``NamePattern`` (`public.*`, `*.audit_log`, `"odd.name".x`). A bare
/// `table` is `public.table`, as in the filter language.
public struct TablePattern: Sendable, Hashable, CustomStringConvertible {
    public var schema: NamePattern
    public var name: NamePattern

    public init(schema: NamePattern, name: NamePattern) {
        self.schema = schema
        self.name = name
    }

    /// Every table of the schemas `schema` matches.
    public static func schema(_ schema: NamePattern) -> TablePattern {
        TablePattern(schema: schema, name: .any)
    }

    /// Parses `schema.table`, `table`, or either part quoted; nil when it is neither.
    public init?(parsing text: String) {
        guard let parts = FilterQuery.split(Substring(text), at: "."), (1...2).contains(parts.count),
              let patterns = Self.patterns(parts) else { return nil }
        if patterns.count == 1 {
            self.init(schema: NamePattern("public", literal: true), name: patterns[0])
        } else {
            self.init(schema: patterns[0], name: patterns[1])
        }
    }

    /// Parses a schema name or pattern, for a rule's `schemas`.
    public static func schema(parsing text: String) -> TablePattern? {
        patterns([Substring(text)]).map { .schema($0[0]) }
    }

    private static func patterns(_ parts: [Substring]) -> [NamePattern]? {
        var patterns: [NamePattern] = []
        for part in parts {
            guard let name = FilterQuery.identifier(part), !name.isEmpty, name.utf8.count <= FilterQuery.maximumNameLength else { return nil }
            patterns.append(NamePattern(name, literal: part.unicodeScalars.first == "\""))
        }
        return patterns
    }

    public func matches(_ table: TableName) -> Bool {
        schema.matches(table.schema) && name.matches(table.name)
    }

    public var description: String { "\(schema).\(name)" }
}
