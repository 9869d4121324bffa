/// Why a subscription's filter was refused. Nothing is subscribed.
public struct FilterError: Error, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// The parameter's syntax is wrong.
        case malformed = "malformed_filter"
        /// A parameter pgherald does not know (often a typo).
        case unknownParameter = "unknown_parameter"
        /// The filter names a table that does not exist.
        case unknownTable = "unknown_table"
        /// The filter names a column that none of its tables has.
        case unknownColumn = "unknown_column"
        /// A value the column can never hold, such as `id.gt.abc` on an integer column.
        case invalidValue = "invalid_value"
    }

    public var code: Code
    /// The query parameter at fault.
    public var parameter: String
    public var message: String

    public init(_ code: Code, parameter: String, _ message: String) {
        self.code = code
        self.parameter = parameter
        self.message = message
    }

    public var description: String { "\(parameter): \(message)" }
}

/// The query-string form of an ``EventFilter``, shared by the socket server and its clients.
///
/// - `table=course` or `table=school.student`; repeat it or separate with commas.
/// - `op=INSERT,DELETE` (case-insensitive).
/// - `where=COLUMN.OP.VALUE`, repeatable, with OP one of eq, neq, lt, lte, gt,
///   gte, in (`in.(a,b,"c,d")`), is (`is.null`, `is.true`, `is.false`), like
///   and ilike (`%` any text, `_` one character); `COLUMN.not.OP.VALUE` negates.
///
/// Conditions combine with AND.
public enum FilterQuery {
    /// Query parameters this parser understands.
    public static let parameterNames = ["table", "op", "where", "topic"]

    /// Limits that keep a hostile query cheap to refuse.
    public static let maximumTables = 100
    public static let maximumPredicates = 32
    public static let maximumValueLength = 1024
    /// PostgreSQL's identifier limit (NAMEDATALEN - 1).
    public static let maximumNameLength = 63

    /// Parses decoded query items. Items named in `ignoring` belong to the caller, and are listed with
    /// this parser's own when a name is unknown.
    public static func parse(
        _ items: [(name: String, value: String)],
        ignoring: [String] = []
    ) throws(FilterError) -> EventFilter {
        var tables: Set<TableName> = []
        var operations: OperationSet = []
        var predicates: [ColumnPredicate] = []
        var topics: [String] = []
        for (name, value) in items where !ignoring.contains(name) {
            switch name {
            case "topic":
                for item in value.split(separator: ",") {
                    let topic = String(item.trimmingPrefix(while: \.isWhitespace))
                    guard !topic.isEmpty, topic.utf8.count <= maximumValueLength, !topic.hasPrefix("realtime:") else {
                        throw FilterError(.malformed, parameter: "topic", "\(quoted(topic)) is not a topic name (without realtime:)")
                    }
                    topics.append(topic)
                }
                guard topics.count <= maximumTables else {
                    throw FilterError(.malformed, parameter: "topic", "more than \(maximumTables) topics")
                }
            case "table":
                guard let items = split(Substring(value), at: ",") else {
                    throw FilterError(.malformed, parameter: "table", "unterminated quote in \(quoted(value))")
                }
                for item in items {
                    tables.insert(try parseTable(item))
                }
                guard tables.count <= maximumTables else {
                    throw FilterError(.malformed, parameter: "table", "more than \(maximumTables) tables")
                }
            case "op":
                for item in value.split(separator: ",", omittingEmptySubsequences: false) {
                    guard let operation = Operation(name: item.trimmingPrefix(while: \.isWhitespace)), operation != .broadcast else {
                        throw FilterError(.malformed, parameter: "op", "\(quoted(item)) is not INSERT, UPDATE, DELETE or TRUNCATE")
                    }
                    operations.insert(OperationSet(operation))
                }
            case "where":
                predicates.append(try parsePredicate(value))
                guard predicates.count <= maximumPredicates else {
                    throw FilterError(.malformed, parameter: "where", "more than \(maximumPredicates) conditions")
                }
            default:
                let known = (parameterNames + ignoring).joined(separator: ", ")
                throw FilterError(.unknownParameter, parameter: String(name.prefix(64)), "unknown parameter (known: \(known))")
            }
        }
        if !topics.isEmpty {
            guard tables.isEmpty, operations.isEmpty, predicates.isEmpty else {
                throw FilterError(.malformed, parameter: "topic", "topic subscribes to broadcasts, which table, op and where do not filter: use one or the other")
            }
            return .topics(topics)
        }
        return EventFilter(
            tables: tables.isEmpty ? nil : tables,
            operations: operations.isEmpty ? .all : operations,
            predicates: predicates
        )
    }

    /// The filter as query items; `parse` turns them back into the same filter.
    public static func queryItems(for filter: EventFilter) -> [(name: String, value: String)] {
        var items: [(name: String, value: String)] = []
        if filter.operations == .broadcast {
            return [("topic", (filter.tables ?? []).map(\.name).sorted().joined(separator: ","))]
        }
        if let tables = filter.tables {
            items += tables.sorted().map { ("table", "\(quotedIfNeeded($0.schema)).\(quotedIfNeeded($0.name))") }
        }
        if filter.operations != .all {
            let names = Operation.allCases.filter { filter.operations.contains($0) }.map(\.rawValue)
            items.append(("op", names.joined(separator: ",")))
        }
        items += filter.predicates.map { ("where", $0.description) }
        return items
    }

    /// One table named as `?table=` names it: `table`, `schema.table`, or either part in double quotes.
    public static func table(parsing text: String) throws(FilterError) -> TableName {
        try parseTable(Substring(text))
    }

    /// `table`, `schema.table`, or either part in double quotes (`"Weird Table"`).
    static func parseTable(_ text: Substring) throws(FilterError) -> TableName {
        let names = split(text, at: ".")?.map(identifier)
        let table: TableName? = switch names {
        case let names? where names.count == 1: names[0].map { TableName(name: $0) }
        case let names? where names.count == 2: names[0].flatMap { schema in names[1].map { TableName(schema: schema, name: $0) } }
        default: nil
        }
        guard let table else {
            throw FilterError(.malformed, parameter: "table", "\(quoted(text)) is not TABLE or SCHEMA.TABLE (quote names with dots: \"a.b\")")
        }
        try checkName(table.schema, parameter: "table")
        try checkName(table.name, parameter: "table")
        return table
    }

    static func parsePredicate(_ text: String) throws(FilterError) -> ColumnPredicate {
        guard text.utf8.count <= maximumNameLength + maximumValueLength + 8 else {
            throw FilterError(.malformed, parameter: "where", "condition longer than \(maximumValueLength) bytes")
        }
        // The column may be quoted; the value is everything after the operator, dots and quotes included.
        let scalars = Substring(text).unicodeScalars
        let columnEnd = scalars.first == "\"" ? split(Substring(text), at: ".", maxSplits: 1)?.first?.endIndex : scalars.firstIndex(of: ".")
        var parts: [Substring] = []
        if let columnEnd, columnEnd < scalars.endIndex {
            let rest = scalars[scalars.index(after: columnEnd)...]
            if let operatorEnd = rest.firstIndex(of: ".") {
                parts = [Substring(scalars[..<columnEnd]), Substring(rest[..<operatorEnd]), Substring(rest[rest.index(after: operatorEnd)...])]
            }
        }
        guard parts.count == 3, let column = identifier(parts[0]) else {
            throw FilterError(.malformed, parameter: "where", "\(quoted(text)) is not COLUMN.OP.VALUE")
        }
        try checkName(column, parameter: "where")
        let negated = parts[1] == "not"
        if negated {
            guard let operatorEnd = parts[2].firstIndex(of: ".") else {
                throw FilterError(.malformed, parameter: "where", "\(quoted(text)) is not COLUMN.not.OP.VALUE")
            }
            parts = [parts[0], parts[2][..<operatorEnd], parts[2][parts[2].index(after: operatorEnd)...]]
        }
        guard let comparison = ColumnPredicate.Comparison(rawValue: String(parts[1])) else {
            throw FilterError(
                .malformed, parameter: "where",
                "unknown operator \(quoted(parts[1])) (known: \(ColumnPredicate.Comparison.allCases.map(\.rawValue).joined(separator: ", ")))"
            )
        }
        let operandText = parts[2]
        let operand: ColumnPredicate.Operand
        switch comparison {
        case .is:
            switch operandText {
            case "null": operand = .null
            case "true": operand = .true
            case "false": operand = .false
            default: throw FilterError(.malformed, parameter: "where", "is takes null, true or false, not \(quoted(operandText))")
            }
        case .in:
            operand = .list(try parseList(operandText))
        default:
            operand = .value(String(operandText))
        }
        return ColumnPredicate(column: column, comparison: comparison, operand: operand, negated: negated)
    }

    /// Parses `(a,b,"c,d")`; inside quotes, `\"` and `\\` stand for themselves.
    static func parseList(_ text: Substring) throws(FilterError) -> [String] {
        let scalars = text.unicodeScalars
        guard scalars.first == "(", scalars.last == ")", scalars.count >= 2 else {
            throw FilterError(.malformed, parameter: "where", "in takes a list like (a,b,c), not \(quoted(text))")
        }
        var items: [String] = []
        var current = String.UnicodeScalarView()
        var inQuotes = false
        var escaping = false
        var wasQuoted = false
        for scalar in scalars.dropFirst().dropLast() {
            if escaping {
                current.append(scalar)
                escaping = false
            } else if inQuotes {
                switch scalar {
                case "\\": escaping = true
                case "\"": inQuotes = false
                default: current.append(scalar)
                }
            } else {
                switch scalar {
                case "\"" where current.isEmpty && !wasQuoted:
                    inQuotes = true
                    wasQuoted = true
                case ",":
                    items.append(String(current))
                    current = String.UnicodeScalarView()
                    wasQuoted = false
                default:
                    guard !wasQuoted else {
                        throw FilterError(.malformed, parameter: "where", "text after a closing quote in \(quoted(text))")
                    }
                    current.append(scalar)
                }
            }
        }
        guard !inQuotes, !escaping else { throw FilterError(.malformed, parameter: "where", "unterminated quote in \(quoted(text))") }
        items.append(String(current))
        guard items.count <= maximumTables else {
            throw FilterError(.malformed, parameter: "where", "in takes at most \(maximumTables) values")
        }
        return items
    }

    static func quoteListItem(_ item: String) -> String {
        let needsQuotes = item.isEmpty || item.unicodeScalars.contains { ",()\"\\".unicodeScalars.contains($0) }
        guard needsQuotes else { return item }
        var quoted = String.UnicodeScalarView()
        quoted.append("\"")
        for scalar in item.unicodeScalars {
            if scalar == "\"" || scalar == "\\" { quoted.append("\\") }
            quoted.append(scalar)
        }
        quoted.append("\"")
        return String(quoted)
    }

    private static func checkName(_ name: String, parameter: String) throws(FilterError) {
        guard !name.isEmpty else { throw FilterError(.malformed, parameter: parameter, "empty name") }
        guard name.utf8.count <= maximumNameLength else {
            throw FilterError(.malformed, parameter: parameter, "name longer than \(maximumNameLength) bytes")
        }
        guard !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw FilterError(.malformed, parameter: parameter, "control character in name")
        }
    }

    /// Quotes user text for an error message, shortened so a huge input cannot bloat the reply.
    private static func quoted(_ text: some StringProtocol) -> String {
        let shown = text.count > 40 ? text.prefix(40) + "…" : Substring(text)
        return "'\(shown)'"
    }
}
