/// The `filter` of a Supabase Realtime `postgres_changes` binding, read as
/// pgherald column predicates.
///
/// `column=op.value`, conditions separated by commas that must all hold:
/// `id=eq.1`, `status=in.(open,"on hold")`, `deleted_at=is.null`,
/// `name=ilike.%drama%`, `id=not.in.(1,2)`. A value may be double-quoted, with
/// backslash escapes, to hold commas or parentheses. Supabase's `match`,
/// `imatch` and `isdistinct` are refused by name.
public enum SupabaseFilter {
    /// Parses `text`; errors name the condition at fault, with parameter `filter`.
    public static func parse(_ text: String) throws(FilterError) -> [ColumnPredicate] {
        guard text.utf8.count <= FilterQuery.maximumPredicates * (FilterQuery.maximumValueLength + FilterQuery.maximumNameLength) else {
            throw FilterError(.malformed, parameter: "filter", "longer than pgherald reads")
        }
        let conditions = try conditions(in: text)
        guard conditions.count <= FilterQuery.maximumPredicates else {
            throw FilterError(.malformed, parameter: "filter", "more than \(FilterQuery.maximumPredicates) conditions")
        }
        var predicates: [ColumnPredicate] = []
        for condition in conditions {
            predicates.append(try predicate(condition))
        }
        return predicates
    }

    private static let unsupported = ["match", "imatch", "isdistinct"]

    private static func predicate(_ condition: Substring) throws(FilterError) -> ColumnPredicate {
        guard let equals = condition.firstIndex(of: "="), let column = FilterQuery.identifier(condition[..<equals]), !column.isEmpty else {
            throw FilterError(.malformed, parameter: "filter", "\(shown(condition)) is not column=op.value")
        }
        var rest = condition[condition.index(after: equals)...]
        var negated = false
        if rest.hasPrefix("not.") {
            negated = true
            rest = rest.dropFirst(4)
        }
        guard let dot = rest.firstIndex(of: ".") else {
            throw FilterError(.malformed, parameter: "filter", "\(shown(condition)) is not column=op.value")
        }
        let name = String(rest[..<dot])
        guard let comparison = ColumnPredicate.Comparison(rawValue: name) else {
            let reason = unsupported.contains(name) ? "operator \(name) is not supported by pgherald" : "unknown operator \(shown(name))"
            throw FilterError(.malformed, parameter: "filter", "\(reason) (known: \(ColumnPredicate.Comparison.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        let valueText = rest[rest.index(after: dot)...]
        let operand: ColumnPredicate.Operand
        switch comparison {
        case .is:
            switch try unquoted(valueText).lowercased() {
            case "null": operand = .null
            case "true": operand = .true
            case "false": operand = .false
            default: throw FilterError(.malformed, parameter: "filter", "is takes null, true or false, not \(shown(valueText))")
            }
        case .in:
            do {
                operand = .list(try FilterQuery.parseList(valueText))
            } catch {
                throw FilterError(.malformed, parameter: "filter", error.message)
            }
        default:
            operand = .value(try unquoted(valueText))
        }
        return ColumnPredicate(column: column, comparison: comparison, operand: operand, negated: negated)
    }

    /// Splits at commas outside double quotes and parentheses.
    private static func conditions(in text: String) throws(FilterError) -> [Substring] {
        var parts: [Substring] = []
        var start = text.startIndex
        var inQuotes = false
        var escaping = false
        var depth = 0
        for index in text.indices {
            let character = text[index]
            if escaping {
                escaping = false
            } else if inQuotes {
                if character == "\\" { escaping = true } else if character == "\"" { inQuotes = false }
            } else {
                switch character {
                case "\"": inQuotes = true
                case "(": depth += 1
                case ")": depth = max(0, depth - 1)
                case "," where depth == 0:
                    parts.append(text[start..<index])
                    start = text.index(after: index)
                default: break
                }
            }
        }
        guard !inQuotes else { throw FilterError(.malformed, parameter: "filter", "unterminated quote in \(shown(text))") }
        parts.append(text[start...])
        return parts
    }

    /// `"a \"b\""` as `a "b"`; text without quotes as it is.
    private static func unquoted(_ text: Substring) throws(FilterError) -> String {
        guard text.first == "\"" else { return String(text) }
        var value = ""
        var escaping = false
        var closed = false
        for character in text.dropFirst() {
            guard !closed else { throw FilterError(.malformed, parameter: "filter", "text after a closing quote in \(shown(text))") }
            if escaping {
                value.append(character)
                escaping = false
            } else if character == "\\" {
                escaping = true
            } else if character == "\"" {
                closed = true
            } else {
                value.append(character)
            }
        }
        guard closed else { throw FilterError(.malformed, parameter: "filter", "unterminated quote in \(shown(text))") }
        return value
    }

    private static func shown(_ text: some StringProtocol) -> String {
        "'\(text.count > 40 ? text.prefix(40) + "…" : Substring(text))'"
    }
}
