/// A condition on one column of an event's row (the new row, or the old row for DELETE).
///
/// Written `COLUMN.OP.VALUE` in a query, e.g. `name.eq.Drama`, `id.gte.10`,
/// `short_code.in.(ICS3U,MCR3U)`, `teacher.is.null`, `name.ilike.%drama%`,
/// `id.not.in.(1,2)`. Comparisons follow the column's JSON type: numbers
/// compare numerically, strings byte for byte, in the order of their code
/// points (PostgreSQL's `C` collation): text that only looks alike, such as
/// `é` as one character or as `e` and a combining accent, is not equal, as
/// it is not to PostgreSQL's `=`. A null column satisfies only `is`,
/// negated or not, as in SQL.
public struct ColumnPredicate: Sendable, Hashable, CustomStringConvertible {
    public enum Comparison: String, Sendable, CaseIterable {
        case eq, neq, lt, lte, gt, gte, `in`, `is`
        /// SQL `LIKE`: `%` any text, `_` one character, `\\` escapes.
        case like
        /// `LIKE` ignoring case.
        case ilike
    }

    public enum Operand: Sendable, Hashable {
        case value(String)
        case list([String])
        case null
        case `true`
        case `false`
    }

    public let column: String
    public let comparison: Comparison
    public let operand: Operand
    /// `not.`: holds where the comparison does not, on a column that is not null.
    public let negated: Bool
    /// A `like` or `ilike` pattern, compiled once rather than at every match.
    let pattern: LikePattern?

    public init(column: String, comparison: Comparison, operand: Operand, negated: Bool = false) {
        self.column = column
        self.comparison = comparison
        self.operand = operand
        self.negated = negated
        pattern = switch (comparison, operand) {
        case (.like, .value(let text)): LikePattern(text, ignoringCase: false)
        case (.ilike, .value(let text)): LikePattern(text, ignoringCase: true)
        default: nil
        }
    }

    /// What the condition costs a character of the value, in units of a
    /// plain comparison: a `like` pattern one for each 64 characters it
    /// names (a machine word each), so budgets count long patterns for what they cost.
    public var cost: Int { pattern?.wordsPerCharacter ?? 1 }

    public func matches(_ row: JSONObject?) -> Bool {
        guard let row, let value = row[column] else { return false }
        guard negated else { return holds(on: value) }
        // As in SQL, NOT of a comparison with null is not true.
        return (comparison == .is || !value.isNull) && !holds(on: value)
    }

    private func holds(on value: JSONValue) -> Bool {
        if let pattern { return pattern.matches(value) }
        switch (comparison, operand) {
        case (.is, .null): return value.isNull
        case (.is, .true): return value == .bool(true)
        case (.is, .false): return value == .bool(false)
        case (.in, .list(let candidates)): return candidates.contains { Self.compare(value, $0) == .equal }
        case (.eq, .value(let text)): return Self.compare(value, text) == .equal
        case (.neq, .value(let text)): return Self.compare(value, text).map { $0 != .equal } ?? false
        case (.lt, .value(let text)): return Self.compare(value, text) == .less
        case (.lte, .value(let text)): return [.less, .equal].contains(Self.compare(value, text))
        case (.gt, .value(let text)): return Self.compare(value, text) == .greater
        case (.gte, .value(let text)): return [.greater, .equal].contains(Self.compare(value, text))
        default: return false
        }
    }

    enum Order { case less, equal, greater }

    /// Orders a column value against query text; nil when they cannot be compared.
    static func compare(_ value: JSONValue, _ text: String) -> Order? {
        switch value {
        case .string(let string):
            if string.hasSameBytes(as: text) { return .equal }
            return string.utf8.lexicographicallyPrecedes(text.utf8) ? .less : .greater
        case .number(let number):
            if number.text == text { return .equal }
            guard let left = number.doubleValue, let right = Double(text), right.isFinite else { return nil }
            return left < right ? .less : left == right ? .equal : .greater
        case .bool(let flag):
            guard let other = Bool(text) else { return nil }
            return flag == other ? .equal : nil
        case .null:
            return nil
        case .array, .object:
            return value.jsonText.hasSameBytes(as: text) ? .equal : nil
        }
    }

    /// The predicate as written in a query: `COLUMN.OP.VALUE`.
    public var description: String {
        let operandText: String
        switch operand {
        case .value(let text): operandText = text
        case .list(let items): operandText = "(" + items.map(FilterQuery.quoteListItem).joined(separator: ",") + ")"
        case .null: operandText = "null"
        case .true: operandText = "true"
        case .false: operandText = "false"
        }
        return "\(FilterQuery.quotedIfNeeded(column)).\(negated ? "not." : "")\(comparison.rawValue).\(operandText)"
    }
}
