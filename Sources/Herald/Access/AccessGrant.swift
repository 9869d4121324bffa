/// What one access rule lets its users and groups see: events on the tables
/// it covers, of the operations it names, whose rows satisfy its conditions.
public struct AccessGrant: Sendable, Hashable {
    /// The tables covered; `nil` means every table.
    public var tables: [TablePattern]?
    public var operations: OperationSet
    /// Conditions every row an event carries must satisfy (its new row and,
    /// on an UPDATE, its old one too), so a row that moves between tenants
    /// shows neither tenant the other's values. An event without rows
    /// (TRUNCATE) or without its row data satisfies none.
    public var predicates: [ColumnPredicate]
    /// The private broadcast and presence topics granted: names, or prefixes
    /// ending in `*` (`room-*`, or `*` for all). Public topics need no grant.
    public var topics: [String]

    public init(tables: [TablePattern]? = nil, operations: OperationSet = .all, predicates: [ColumnPredicate] = [], topics: [String] = []) {
        self.tables = tables
        self.operations = operations
        self.predicates = predicates
        self.topics = topics
    }

    /// Whether the private topic `name` (without `realtime:`) is granted.
    public func covers(topic name: String) -> Bool {
        topics.contains { pattern in
            pattern.hasSuffix("*") ? name.hasPrefix(pattern.dropLast()) : name == pattern
        }
    }

    /// Whether the grant lets everything through.
    public var isUnrestricted: Bool {
        tables == nil && operations == .all && predicates.isEmpty
    }

    /// Whether some events of `table` may be seen under this grant.
    public func covers(_ table: TableName) -> Bool {
        tables?.contains { $0.matches(table) } ?? true
    }

    func matches(_ event: Event, row: inout LazyRow) -> Bool {
        if event.operation == .broadcast {
            return row.value?["private"] != .bool(true) || covers(topic: event.table.name)
        }
        guard operations.contains(event.operation), covers(event.table) else { return false }
        if predicates.isEmpty { return true }
        guard let parsed = row.value, predicates.allSatisfy({ $0.matches(parsed) }) else { return false }
        guard let old = row.oldOfUpdate else { return true }
        return predicates.allSatisfy { $0.matches(old) }
    }
}
