import Herald

/// One round trip that asks, for several cohorts, which row images their
/// policies let them select: a read-only transaction that is rolled back.
///
/// The images of each table are set once, as a transaction-local setting;
/// then each cohort, inside a savepoint of its own, sets its role and claims
/// and runs one statement per table, which returns the positions of the
/// images that pass. Rolling back to the savepoint after each cohort judges
/// every cohort alone, as a PostgREST request is: what a policy's function
/// keeps in transaction-local settings (`set_config(…, true)`, a cache of
/// the caller's teams) never reaches the next cohort.
struct RowVisibilityScript {
    /// What each statement of the script is, in order, so that a result or
    /// an error can be put down to its cohort.
    enum Statement: Equatable {
        case setup
        case cohort(Int)
        case check(cohort: Int, table: TableName)
        /// The server's clock, in microseconds, once the setup or a cohort's
        /// part is done: what each cohort's checks cost. (Results are sent
        /// together at the script's end, so their arrival cannot tell.)
        case clock(after: Int?)
    }

    /// One cohort's part: its identity and, per table, the condition its
    /// rows must satisfy (``TableAccess/condition``).
    struct Cohort {
        var index: Int
        var identity: RowSecurityIdentity
        var conditions: [(table: TableName, condition: String)]

        /// The images its checks judge.
        func images(in images: [TableName: [RawJSON]]) -> Int {
            conditions.reduce(0) { $0 + (images[$1.table]?.count ?? 0) }
        }
    }

    /// How long one statement may run: a policy that hangs ends its cohort's streams, not the gate.
    static let statementTimeout = "5s"
    /// The SQLSTATE of a statement cancelled by its timeout.
    static let timedOut = "57014"

    let sql: String
    let statements: [Statement]

    /// - Parameters:
    ///   - images: per table, the row images to judge, as JSON objects.
    ///   - quote: quotes text as an SQL literal (libpq's `PQescapeLiteral`).
    ///   - quoteIdentifier: quotes a name (libpq's `PQescapeIdentifier`).
    ///   - statement: the statement that checks a table's images against a
    ///     condition: `EXECUTE` of ``check(type:alias:setting:condition:)``
    ///     prepared once, so that it is not planned again for every cohort.
    ///   - cohortTimeout: in a script that several cohorts share, how long
    ///     each cohort's check may run, in milliseconds: one that runs longer
    ///     is cancelled, and judged again alone, so that the others do not wait for it.
    init(
        images: [TableName: [RawJSON]], cohorts: [Cohort], cohortTimeout: CheckBudget? = nil,
        quote: (String) throws(LibpqError) -> String, quoteIdentifier: (String) throws(LibpqError) -> String,
        statement: (_ table: TableName, _ condition: String) throws(LibpqError) -> String
    ) throws(LibpqError) {
        var sql = "BEGIN READ ONLY;\nSET LOCAL statement_timeout = '\(Self.statementTimeout)';\n"
        var statements: [Statement] = [.setup, .setup]
        for table in images.keys.sorted() {
            var array: [UInt8] = [UInt8(ascii: "[")]
            for (index, image) in images[table, default: []].enumerated() {
                if index > 0 { array.append(UInt8(ascii: ",")) }
                array += image.bytes
            }
            array.append(UInt8(ascii: "]"))
            sql += "SELECT set_config('\(Self.setting(for: table))', \(try quote(String(decoding: array, as: UTF8.self))), true);\n"
            statements.append(.setup)
        }
        sql += Self.clock
        statements.append(.clock(after: nil))
        for cohort in cohorts {
            // Around the checks: the savepoint, its time limit, the role, the claims; the rollback and the clock after them.
            sql += "SAVEPOINT pgherald_cohort;\n"
            statements.append(.cohort(cohort.index))
            if let cohortTimeout {
                let time = cohortTimeout.time(images: cohort.images(in: images))
                sql += "SET LOCAL statement_timeout = \(max(1, Int(time / .milliseconds(1))));\n"
                statements.append(.cohort(cohort.index))
            }
            sql += try cohort.identity.becoming(quote: quote, quoteIdentifier: quoteIdentifier)
            statements += [.cohort(cohort.index), .cohort(cohort.index)]
            for (table, condition) in cohort.conditions where images[table] != nil {
                sql += try statement(table, condition) + ";\n"
                statements.append(.check(cohort: cohort.index, table: table))
            }
            sql += "ROLLBACK TO SAVEPOINT pgherald_cohort;\n" + Self.clock
            statements += [.cohort(cohort.index), .clock(after: cohort.index)]
        }
        sql += "ROLLBACK"
        statements.append(.setup)
        self.sql = sql
        self.statements = statements
    }

    private static let clock = "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;\n"

    /// The microseconds a ``Statement/clock(after:)`` result holds.
    static func microseconds(_ result: LibpqConnection.QueryResult) -> Int64? {
        result.rows.first?.first.flatMap { $0.flatMap { Int64($0) } }
    }

    /// The transaction-local setting that holds a table's images: named
    /// after the table, so that a prepared check reads the same one in
    /// every batch.
    static func setting(for table: TableName) -> String {
        "pgherald.rls_\(hexHash(table.description))"
    }

    /// A prepared check's name: after its text, so that a changed policy is a new statement.
    static func statementName(for sql: String) -> String {
        "pgherald_rls_\(hexHash(sql))"
    }

    /// FNV-1a, 64 bits, as hex: stable across runs, unlike `hashValue`.
    private static func hexHash(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
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
