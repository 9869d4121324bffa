import Herald

extension WebhookEndpoint {
    /// What decides which events the endpoint's feed holds and where they go,
    /// in one canonical line: the url, the tables, the operations and the
    /// conditions. Daemons sharing a database share the endpoint's feed by
    /// name, so they must agree on this; delivery settings (secrets, limits,
    /// concurrency) may differ.
    public var feedDefinition: String {
        var parts = ["url=\(url)"]
        if let tables = filter.tables { parts.append("table=" + tables.map(\.description).sorted().joined(separator: ",")) }
        if let schemas = filter.schemas { parts.append("schema=" + schemas.sorted().joined(separator: ",")) }
        if filter.operations != .all {
            let names = Operation.allCases.filter { filter.operations.contains($0) }.map(\.rawValue)
            parts.append("op=" + names.joined(separator: ","))
        }
        if !filter.predicates.isEmpty { parts.append("where=" + filter.predicates.map(Self.text).sorted().joined(separator: ",")) }
        return parts.joined(separator: " ")
    }

    private static func text(_ predicate: ColumnPredicate) -> String {
        let operand = switch predicate.operand {
        case .value(let value): value
        case .list(let values): "(" + values.joined(separator: ",") + ")"
        case .null: "null"
        case .true: "true"
        case .false: "false"
        }
        return "\(predicate.column).\(predicate.negated ? "not." : "")\(predicate.comparison.rawValue).\(operand)"
    }
}
