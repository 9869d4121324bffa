extension LibpqConnection {
    /// Runs the query `sql` through a cursor and fetches its rows in steps
    /// until they hold about `byteLimit` bytes of text, or the query ends.
    ///
    /// A result is held whole in memory: a page of 500 journal rows of 1 MB
    /// each was 500 MB for as long as its reader served it. Each step asks
    /// for as many rows as the rest of the budget holds at the largest row
    /// seen so far (the first, for ``firstBoundedReadStep``), so a read passes
    /// `byteLimit` by at most a step's rows and holds at least one row.
    /// - Returns: the rows fetched, and whether they are all the query had.
    public func execute(
        _ sql: String, parameters: [String?], byteLimit: Int, timeout: Duration? = nil
    ) throws(LibpqError) -> (result: QueryResult, isComplete: Bool) {
        try inTransaction { () throws(LibpqError) in
            try execute("DECLARE pgherald_bounded_read NO SCROLL CURSOR FOR \(sql)", parameters: parameters, timeout: timeout)
            var read = QueryResult(columns: [], rows: [], affectedRows: nil)
            var bytes = 0
            var largest = 1
            var step = Self.firstBoundedReadStep
            while true {
                let fetched = try execute("FETCH \(step) FROM pgherald_bounded_read", timeout: timeout)
                if read.columns.isEmpty { read.columns = fetched.columns }
                for row in fetched.rows {
                    let size = row.reduce(0) { $0 + ($1?.utf8.count ?? 0) }
                    bytes += size
                    largest = max(largest, size)
                }
                read.rows += fetched.rows
                if fetched.rows.count < step { return (read, true) }
                if bytes >= byteLimit { return (read, false) }
                step = min(Self.largestBoundedReadStep, max(1, (byteLimit - bytes) / largest))
            }
        }
    }

    /// Rows of unknown size a bounded read asks for first.
    static let firstBoundedReadStep = 8
    /// The most rows one step asks for, however small they are.
    static let largestBoundedReadStep = 4096
}
