extension LibpqConnection {
    /// Runs the query `sql` and returns its rows in order up to the one that
    /// brings the text of their `column` to `byteLimit` bytes: at least one
    /// row, and past `byteLimit` by at most one row's `column`.
    ///
    /// A result is held whole in memory: a page of 500 journal rows of 1 MB
    /// each was 500 MB for as long as its reader served it. The server counts
    /// each row's size from its stored header (`octet_length` reads no TOAST),
    /// so the rows past the limit are neither fetched from TOAST nor sent,
    /// in one statement. A cursor fetched in steps asked for rows of unknown
    /// size first, and read eight rows of 1 MB for a limit of 1 MiB.
    ///
    /// `sql` must order its rows itself (ORDER BY keeps the server from
    /// merging it into the query around it) and name `column` among its outputs.
    /// - Returns: the rows, with three columns of the count's own after
    ///   `sql`'s, and whether they are all the query had.
    public func execute(
        _ sql: String, parameters: [String?], byteLimit: Int, sizedBy column: String, timeout: Duration? = nil
    ) throws(LibpqError) -> (result: QueryResult, isComplete: Bool) {
        let result = try execute("""
            SELECT * FROM (
                SELECT bounded.*,
                       row_number() OVER running AS pgherald_row,
                       sum(octet_length(bounded.\(column))) OVER running - octet_length(bounded.\(column)) AS pgherald_bytes_before,
                       count(*) OVER () AS pgherald_rows
                  FROM (\(sql)) AS bounded
                WINDOW running AS (ROWS UNBOUNDED PRECEDING)
            ) AS sized
             WHERE pgherald_bytes_before < $\(parameters.count + 1)
             ORDER BY pgherald_row
            """, parameters: parameters + [String(byteLimit)], timeout: timeout)
        guard let total = result.columns.firstIndex(of: "pgherald_rows"), let first = result.rows.first else { return (result, true) }
        return (result, first[total].flatMap { Int($0) } == result.rows.count)
    }
}
