public import Herald
public import Logging
import Synchronization

/// One column of a table.
public struct TableColumn: Sendable, Hashable {
    public var name: String
    public var type: ColumnType
}

/// The tables and columns of the database, for checking subscription filters.
///
/// Lookups are answered from a cached snapshot. A name the snapshot lacks
/// triggers a refresh (a table may have been created since), at most one per
/// `minimumRefreshInterval`, so a flood of bad filters costs the database
/// little. Queries run on a queue of their own, never on the async runtime.
public final class SchemaCatalog: Sendable {
    struct Snapshot: Sendable {
        var columns: [TableName: [String: ColumnType]] = [:]
        /// Each table's columns in their table order.
        var orderedColumns: [TableName: [TableColumn]] = [:]
        /// Every type each column name has in some table.
        var allColumns: [String: Set<ColumnType>] = [:]
        var taken: ContinuousClock.Instant?
    }

    let minimumRefreshInterval: Duration
    let logger: Logger
    private let connection: SerialConnection
    private let snapshot = Mutex(Snapshot())

    public init(connection: ConnectionString, minimumRefreshInterval: Duration = .milliseconds(250), logger: Logger) {
        self.connection = SerialConnection(connection, applicationName: "pgherald-catalog")
        self.minimumRefreshInterval = minimumRefreshInterval
        self.logger = logger
    }

    /// Checks that every table and column the filter names exists, and that
    /// each value is one the column can hold.
    ///
    /// A column must exist in at least one of the filter's tables, or in any
    /// user table when the filter names none; a value is refused only when
    /// no such column can hold it.
    public func validate(_ filter: EventFilter) async throws -> FilterError? {
        // Topics are names, not tables.
        if filter.operations == .broadcast { return nil }
        var current = snapshot.withLock { $0 }
        if problem(with: filter, in: current) != nil {
            current = try await refreshed()
        }
        return problem(with: filter, in: current)
    }

    private func problem(with filter: EventFilter, in snapshot: Snapshot) -> FilterError? {
        let tables = filter.tables.map { $0.sorted() }
        for table in tables ?? [] where snapshot.columns[table] == nil {
            return FilterError(.unknownTable, parameter: "table", "table \(table) does not exist")
        }
        for predicate in filter.predicates {
            let types: [ColumnType] = if let tables {
                tables.compactMap { snapshot.columns[$0]?[predicate.column] }
            } else {
                Array(snapshot.allColumns[predicate.column] ?? [])
            }
            guard let firstType = types.first else {
                let scope = tables.map { "table \($0.map(\.description).joined(separator: ", "))" } ?? "any table"
                return FilterError(.unknownColumn, parameter: "where", "column \(predicate.column) does not exist in \(scope)")
            }
            let problems = types.map { Self.problem(with: predicate, of: $0) }
            if problems.allSatisfy({ $0 != nil }), let problem = problems.first ?? nil {
                return FilterError(.invalidValue, parameter: "where", "column \(predicate.column) is \(firstType): \(problem)")
            }
        }
        return nil
    }

    /// Why `predicate` can never hold on a column of `type`.
    static func problem(with predicate: ColumnPredicate, of type: ColumnType) -> String? {
        // A pattern is text whatever the column: `id.like.1%` is fine on an integer.
        if predicate.comparison == .like || predicate.comparison == .ilike { return nil }
        let values: [String]
        switch predicate.operand {
        case .value(let text): values = [text]
        case .list(let items): values = items
        case .null: return nil
        case .true, .false:
            return type.holdsBooleans ? nil : "is.\(predicate.operand == .true ? "true" : "false") holds only for booleans"
        }
        for value in values {
            if let problem = type.problem(with: value) { return "'\(value.prefix(40))' is \(problem)" }
        }
        return nil
    }

    /// The columns of `table` in table order, or nil if it does not exist.
    ///
    /// - Parameter expecting: column names the caller has seen in a row; one
    ///   the snapshot lacks (a column added since) triggers a refresh.
    public func columns(of table: TableName, expecting names: [String] = []) async throws -> [TableColumn]? {
        let cached = snapshot.withLock { $0.orderedColumns[table] }
        if let cached, names.allSatisfy({ name in cached.contains { $0.name == name } }) { return cached }
        return try await refreshed().orderedColumns[table]
    }

    /// A fresh snapshot, or the current one if it was taken very recently.
    ///
    /// The check runs on the connection's serial queue, so a burst of
    /// unknown names waiting there costs one query, not one each.
    private func refreshed() async throws -> Snapshot {
        do {
            return try await connection.run { connection throws(LibpqError) in
                let current = self.snapshot.withLock { $0 }
                if let taken = current.taken, ContinuousClock.now - taken < self.minimumRefreshInterval {
                    return current
                }
                let orderedColumns = try Self.loadColumns(on: connection)
                var columns: [TableName: [String: ColumnType]] = [:]
                var allColumns: [String: Set<ColumnType>] = [:]
                for (table, list) in orderedColumns {
                    columns[table] = Dictionary(list.map { ($0.name, $0.type) }, uniquingKeysWith: { first, _ in first })
                    for column in list { allColumns[column.name, default: []].insert(column.type) }
                }
                let fresh = Snapshot(columns: columns, orderedColumns: orderedColumns, allColumns: allColumns, taken: .now)
                self.snapshot.withLock { $0 = fresh }
                return fresh
            }
        } catch {
            logger.warning("cannot read the table catalog", metadata: ["error": "\(error)"])
            throw error
        }
    }

    private static func loadColumns(on connection: LibpqConnection) throws(LibpqError) -> [TableName: [TableColumn]] {
        // A domain is checked as its base type.
        let result = try connection.execute("""
            SELECT n.nspname, c.relname, a.attname, coalesce(b.typname, t.typname) AS typname
              FROM pg_class c
              JOIN pg_namespace n ON n.oid = c.relnamespace
              JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
              JOIN pg_type t ON t.oid = a.atttypid
              LEFT JOIN pg_type b ON t.typtype = 'd' AND b.oid = t.typbasetype
             WHERE c.relkind IN ('r', 'p')
               AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pgherald')
               AND n.nspname NOT LIKE 'pg_toast%'
             ORDER BY c.oid, a.attnum
            """, timeout: .seconds(10))
        var columns: [TableName: [TableColumn]] = [:]
        for row in result.namedRows {
            let table = TableName(schema: try row.value("nspname"), name: try row.value("relname"))
            columns[table, default: []].append(TableColumn(name: try row.value("attname"), type: ColumnType(name: try row.value("typname"))))
        }
        return columns
    }
}
