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

    public init(tables: [TablePattern]? = nil, operations: OperationSet = .all, predicates: [ColumnPredicate] = []) {
        self.tables = tables
        self.operations = operations
        self.predicates = predicates
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
        guard operations.contains(event.operation), covers(event.table) else { return false }
        if predicates.isEmpty { return true }
        guard let parsed = row.value, predicates.allSatisfy({ $0.matches(parsed) }) else { return false }
        guard let old = row.oldOfUpdate else { return true }
        return predicates.allSatisfy { $0.matches(old) }
    }
}
