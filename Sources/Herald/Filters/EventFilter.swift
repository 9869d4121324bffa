/// Which events a subscriber wants. All given conditions must hold.
public struct EventFilter: Sendable, Hashable {
    /// Only events on these tables; `nil` means every table.
    public var tables: Set<TableName>?
    /// Only events on tables in these schemas; `nil` means every schema.
    public var schemas: Set<String>?
    /// Only these operations.
    public var operations: OperationSet
    /// Conditions on the row's columns.
    public var predicates: [ColumnPredicate]
    /// What the subscriber's access grant lets through: an event must also
    /// match one of these. `nil`: no restriction. Set by ``narrowed(to:)``.
    public internal(set) var access: [AccessGrant]?

    public init(
        tables: Set<TableName>? = nil,
        schemas: Set<String>? = nil,
        operations: OperationSet = .all,
        predicates: [ColumnPredicate] = []
    ) {
        self.tables = tables
        self.schemas = schemas
        self.operations = operations
        self.predicates = predicates
    }

    /// Every row change.
    public static let all = EventFilter()

    /// Broadcasts sent with `pgherald.send` to these topics, whose events
    /// name the topic as a table of ``topicSchema``.
    public static func topics(_ names: some Sequence<String>) -> EventFilter {
        EventFilter(tables: Set(names.map { TableName(schema: topicSchema, name: $0) }), operations: .broadcast)
    }

    /// The schema a broadcast event names with its topic.
    public static let topicSchema = "realtime"

    public func matches(_ event: Event) -> Bool {
        var row = LazyRow(event: event)
        return matches(event, row: &row)
    }

    /// Whether matching reads the row's columns (conditions here or in an access grant): work that
    /// grows with the row and the conditions, which a subscriber pays for on its own task.
    var readsColumns: Bool {
        !predicates.isEmpty || access?.contains { !$0.predicates.isEmpty } == true
    }

    /// Whether it holds a `like` or `ilike` pattern, whose checks may cost much an event: its
    /// subscriber's checks start on ``ColumnCheckLane`` until they prove cheap.
    public var matchesPatterns: Bool {
        let grants = access?.flatMap(\.predicates) ?? []
        return (predicates + grants).contains { $0.pattern != nil }
    }

    /// This filter without its conditions on columns: every event it matches, and more, decided
    /// without reading a row.
    var withoutColumnConditions: EventFilter {
        var coarse = self
        coarse.predicates = []
        coarse.access = access?.map { grant in
            var wider = grant
            wider.predicates = []
            return wider
        }
        return coarse
    }

    /// Matches with a row that is parsed at most once, however many filters look at it.
    func matches(_ event: Event, row: inout LazyRow) -> Bool {
        guard operations.contains(event.operation) else { return false }
        if let tables, !tables.contains(event.table) { return false }
        if let schemas, !schemas.contains(event.table.schema) { return false }
        if !predicates.isEmpty {
            let parsed = row.value
            guard predicates.allSatisfy({ $0.matches(parsed) }) else { return false }
        }
        guard let access else { return true }
        for grant in access where grant.matches(event, row: &row) {
            return true
        }
        return false
    }
}

/// An event's row (and its old row), parsed on first use.
struct LazyRow {
    let event: Event
    private var parsed: JSONObject??
    private var parsedOld: JSONObject??

    init(event: Event) {
        self.event = event
    }

    var value: JSONObject? {
        mutating get {
            if let parsed { return parsed }
            let row = event.row
            parsed = .some(row)
            return row
        }
    }

    /// The old row of an UPDATE, which access grants check too; nil for other events.
    var oldOfUpdate: JSONObject? {
        mutating get {
            if let parsedOld { return parsedOld }
            let old = event.newJSON == nil ? nil : event.old
            parsedOld = .some(old)
            return old
        }
    }
}
