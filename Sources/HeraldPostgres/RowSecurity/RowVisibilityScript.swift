import Herald

/// One round trip that asks, for several cohorts, which row images their
/// policies let them select: a read-only transaction that is rolled back.
///
/// The images of each table are set once, as a transaction-local setting;
/// then each cohort sets its role and claims and runs one statement per
/// table, which returns the positions of the images that pass.
struct RowVisibilityScript {
    /// What each statement of the script is, in order, so that a result or
    /// an error can be put down to its cohort.
    enum Statement: Equatable {
        case setup
        case cohort(Int)
        case check(cohort: Int, table: TableName)
    }

    /// One cohort's part: its identity and, per table, the condition its
    /// rows must satisfy (``TableAccess/condition``).
    struct Cohort {
        var index: Int
        var identity: RowSecurityIdentity
        var conditions: [(table: TableName, condition: String)]
    }

    /// How long one statement may run: a policy that hangs ends its cohort's streams, not the gate.
    static let statementTimeout = "5s"

    let sql: String
    let statements: [Statement]

    /// - Parameters:
    ///   - images: per table, the row images to judge, as JSON objects.
    ///   - quote: quotes text as an SQL literal (libpq's `PQescapeLiteral`).
    ///   - quoteName: quotes an identifier.
    init(
        images: [TableName: [RawJSON]], cohorts: [Cohort],
        quote: (String) throws(LibpqError) -> String, quoteName: (String) throws(LibpqError) -> String
    ) throws(LibpqError) {
        var sql = "BEGIN READ ONLY;\nSET LOCAL statement_timeout = '\(Self.statementTimeout)';\n"
        var statements: [Statement] = [.setup, .setup]
        let tables = images.keys.sorted()
        var settings: [TableName: String] = [:]
        for (position, table) in tables.enumerated() {
            let name = "pgherald.rls_rows_\(position)"
            settings[table] = name
            var array: [UInt8] = [UInt8(ascii: "[")]
            for (index, image) in images[table, default: []].enumerated() {
                if index > 0 { array.append(UInt8(ascii: ",")) }
                array += image.bytes
            }
            array.append(UInt8(ascii: "]"))
            sql += "SELECT set_config('\(name)', \(try quote(String(decoding: array, as: UTF8.self))), true);\n"
            statements.append(.setup)
        }
        for cohort in cohorts {
            sql += "SET LOCAL ROLE \(try quoteName(cohort.identity.role));\n"
            sql += "SELECT set_config('request.jwt.claims', \(try quote(cohort.identity.claimsText)), true);\n"
            statements += [.cohort(cohort.index), .cohort(cohort.index)]
            for (table, condition) in cohort.conditions {
                guard let setting = settings[table] else { continue }
                let type = try quoteName(table.schema) + "." + quoteName(table.name)
                sql += Self.check(type: type, alias: try quoteName(table.name), setting: setting, condition: condition)
                sql += ";\n"
                statements.append(.check(cohort: cohort.index, table: table))
            }
        }
        sql += "ROLLBACK"
        statements.append(.setup)
        self.sql = sql
        self.statements = statements
    }

    /// The positions (from 1) of the images that satisfy `condition`, as
    /// one comma-separated text. Each image becomes a row of the table's
    /// type under the table's own name, so the policies' references to its
    /// columns resolve as they would in a query of the table.
    static func check(type: String, alias: String, setting: String, condition: String) -> String {
        """
            SELECT coalesce(string_agg(pgherald_input.pgherald_position::text, ','), '') AS visible
            FROM jsonb_array_elements(current_setting('\(setting)')::jsonb) WITH ORDINALITY AS pgherald_input(pgherald_image, pgherald_position)
            CROSS JOIN LATERAL jsonb_populate_record(NULL::\(type), pgherald_input.pgherald_image) AS \(alias)
            WHERE \(condition)
            """
    }

    /// The positions a check's result names.
    static func positions(_ result: LibpqConnection.QueryResult) -> Set<Int> {
        guard let text = result.rows.first?.first ?? nil else { return [] }
        return Set(text.split(separator: ",").compactMap { Int($0) })
    }
}
