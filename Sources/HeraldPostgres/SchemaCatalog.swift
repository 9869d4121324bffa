public import Herald
public import Logging
import Synchronization

/// The tables and columns of the database, for checking subscription filters.
///
/// Lookups are answered from a cached snapshot. A name the snapshot lacks
/// triggers a refresh (a table may have been created since), at most one per
/// `minimumRefreshInterval`, so a flood of bad filters costs the database
/// little. Queries run on a queue of their own, never on the async runtime.
public final class SchemaCatalog: Sendable {
    struct Snapshot: Sendable {
        var columns: [TableName: Set<String>] = [:]
        var allColumns: Set<String> = []
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

    /// Checks that every table and column the filter names exists.
    ///
    /// A column must exist in at least one of the filter's tables, or in any
    /// user table when the filter names none.
    public func validate(_ filter: EventFilter) async throws -> FilterError? {
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
            let known: Bool
            if let tables {
                known = tables.contains { snapshot.columns[$0]?.contains(predicate.column) == true }
            } else {
                known = snapshot.allColumns.contains(predicate.column)
            }
            if !known {
                let scope = tables.map { "table \($0.map(\.description).joined(separator: ", "))" } ?? "any table"
                return FilterError(.unknownColumn, parameter: "where", "column \(predicate.column) does not exist in \(scope)")
            }
        }
        return nil
    }

    /// A fresh snapshot, or the current one if it was taken very recently.
    ///
    /// The check runs on the connection's serial queue, so a burst of
    /// unknown names waiting there costs one query, not one each.
    private func refreshed() async throws -> Snapshot {
        do {
            return try await connection.run { connection throws(PostgresError) in
                let current = self.snapshot.withLock { $0 }
                if let taken = current.taken, ContinuousClock.now - taken < self.minimumRefreshInterval {
                    return current
                }
                let columns = try Self.loadColumns(on: connection)
                let fresh = Snapshot(columns: columns, allColumns: columns.values.reduce(into: []) { $0.formUnion($1) }, taken: .now)
                self.snapshot.withLock { $0 = fresh }
                return fresh
            }
        } catch {
            logger.warning("cannot read the table catalog", metadata: ["error": "\(error)"])
            throw error
        }
    }

    private static func loadColumns(on connection: PostgresConnection) throws(PostgresError) -> [TableName: Set<String>] {
        let result = try connection.execute("""
            SELECT n.nspname, c.relname, a.attname
              FROM pg_class c
              JOIN pg_namespace n ON n.oid = c.relnamespace
              JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
             WHERE c.relkind IN ('r', 'p')
               AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pgherald')
               AND n.nspname NOT LIKE 'pg_toast%'
            """, timeout: .seconds(10))
        var columns: [TableName: Set<String>] = [:]
        for row in result.rows {
            guard let schema = row[0], let table = row[1], let column = row[2] else { continue }
            columns[TableName(schema: schema, name: table), default: []].insert(column)
        }
        return columns
    }
}
