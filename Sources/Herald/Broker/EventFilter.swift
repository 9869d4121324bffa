/// Which events a subscriber wants. All given conditions must hold.
public struct EventFilter: Sendable, Hashable {
    /// Only events on these tables; `nil` means every table.
    public var tables: Set<TableName>?
    /// Only events on tables in these schemas; `nil` means every schema.
    public var schemas: Set<String>?
    /// Only these operations.
    public var operations: OperationSet

    public init(tables: Set<TableName>? = nil, schemas: Set<String>? = nil, operations: OperationSet = .all) {
        self.tables = tables
        self.schemas = schemas
        self.operations = operations
    }

    /// Every event.
    public static let all = EventFilter()

    public func matches(_ event: Event) -> Bool {
        guard operations.contains(event.operation) else { return false }
        if let tables, !tables.contains(event.table) { return false }
        if let schemas, !schemas.contains(event.table.schema) { return false }
        return true
    }
}
