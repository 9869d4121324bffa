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
    /// For an identity whose database policies decide its private channels
    /// (`realtime.messages` under row-level security): exactly the topics
    /// they let it read, in place of ``topics``, which cannot widen them.
    public var topicsReadableByPolicy: Set<String>?
    /// The live queries granted: names, or prefixes ending in `*`. A query
    /// is served only where every table it reads is granted too.
    public var queries: [String]
    /// Key `rls: true`: the database's row-level security, evaluated as
    /// this identity, decides which of the granted rows and columns reach
    /// the subscriber. Nil: the grant alone decides.
    public var rowSecurity: RowSecurityIdentity?

    public init(
        tables: [TablePattern]? = nil, operations: OperationSet = .all, predicates: [ColumnPredicate] = [], topics: [String] = [],
        queries: [String] = [], rowSecurity: RowSecurityIdentity? = nil
    ) {
        self.tables = tables
        self.operations = operations
        self.predicates = predicates
        self.topics = topics
        self.queries = queries
        self.rowSecurity = rowSecurity
    }

    /// Whether the live query `name` is granted (its tables are checked apart).
    public func covers(query name: String) -> Bool {
        queries.contains { Self.matches(name, pattern: $0) }
    }

    /// A name against a name, or a prefix ending in `*`.
    private static func matches(_ name: String, pattern: String) -> Bool {
        pattern.hasSuffix("*") ? name.hasPrefix(pattern.dropLast()) : name == pattern
    }

    /// Whether every row of `table` may be read under this grant: it is
    /// covered with no row conditions, so a query's result over it shows nothing withheld.
    public func coversWholly(_ table: TableName) -> Bool {
        covers(table) && predicates.isEmpty && rowSecurity == nil
    }

    /// Whether the private topic `name` (without `realtime:`) is granted.
    public func covers(topic name: String) -> Bool {
        if let topicsReadableByPolicy { return topicsReadableByPolicy.contains(name) }
        return topics.contains { Self.matches(name, pattern: $0) }
    }

    /// Whether the grant lets everything through.
    public var isUnrestricted: Bool {
        tables == nil && operations == .all && predicates.isEmpty && rowSecurity == nil
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
