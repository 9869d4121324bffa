import CLibPQ
#if canImport(Glibc)
import Glibc
#endif

/// One libpq connection, used from one thread at a time.
///
/// Every wait is a `poll()` that also watches an optional ``WakeSignal``, so
/// a shutting-down daemon never hangs in connect or in a query.
public final class LibpqConnection {
    let handle: OpaquePointer
    let connectionString: ConnectionString
    private var wake: WakeSignal?
    /// The limit for a query run without a timeout of its own; `nil`: none.
    var queryTimeout: Duration?
    private let notices: NoticeBuffer
    /// The names of the statements this session has prepared.
    private var preparedStatements: Set<String> = []

    /// A server message (NOTICE, WARNING, ...) received while running statements.
    public struct Notice: Sendable, Hashable {
        public var severity: String
        public var message: String
        /// What to do about it, when the server says.
        public var hint: String? = nil
    }

    /// The result of the last statement of a query.
    public struct QueryResult: Sendable {
        public var columns: [String]
        public var rows: [[String?]]
        /// Rows affected, for INSERT/UPDATE/DELETE.
        public var affectedRows: Int?
    }

    /// Settings passed to libpq before the user's conninfo, which overrides them.
    static let defaultParameters: [(String, String)] = [
        // Notice a dead peer within about a minute rather than the kernel's two hours.
        ("keepalives_idle", "30"),
        ("keepalives_interval", "10"),
        ("keepalives_count", "3"),
    ]

    private init(handle: OpaquePointer, connectionString: ConnectionString, wake: WakeSignal?) {
        self.handle = handle
        self.connectionString = connectionString
        self.wake = wake
        self.notices = NoticeBuffer()
        PQsetNoticeReceiver(handle, { context, result in
            guard let context, let result else { return }
            let buffer = Unmanaged<NoticeBuffer>.fromOpaque(context).takeUnretainedValue()
            let severity = PQresultErrorField(result, Int32(UInt8(ascii: "S"))).map { String(cString: $0) } ?? "NOTICE"
            let message = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) } ?? ""
            let hint = PQresultErrorField(result, Int32(UInt8(ascii: "H"))).map { String(cString: $0) }
            buffer.notices.append(Notice(severity: severity, message: message, hint: hint))
        }, Unmanaged.passUnretained(notices).toOpaque())
    }

    deinit {
        PQfinish(handle)
    }

    /// Opens a connection.
    ///
    /// - Parameters:
    ///   - timeout: gives up after this long. libpq's own `connect_timeout` is
    ///     not enforced by its non-blocking API, so this one is.
    ///   - applicationName: shown in `pg_stat_activity` unless the conninfo sets `application_name`.
    public static func connect(
        _ connectionString: ConnectionString,
        timeout: Duration = .seconds(10),
        applicationName: String = "pgherald-admin"
    ) throws(LibpqError) -> LibpqConnection {
        try connect(connectionString, timeout: timeout, applicationName: applicationName, wake: nil)
    }

    /// Opens a connection whose waits end with ``LibpqError/Code/stopped`` when `wake` fires.
    static func connect(
        _ connectionString: ConnectionString,
        timeout: Duration,
        applicationName: String,
        wake: WakeSignal?
    ) throws(LibpqError) -> LibpqConnection {
        // Later entries override what the expanded conninfo in dbname set.
        let parameters = defaultParameters + [
            ("fallback_application_name", applicationName),
            ("dbname", connectionString.rawValue),
        ] + (connectionString.separatePassword.map { [("password", $0)] } ?? [])
        let handle = withOptionalCStrings(parameters.map(\.0)) { keywords in
            withOptionalCStrings(parameters.map(\.1)) { values in
                PQconnectStartParams(keywords, values, 1)
            }
        }
        guard let handle else { throw LibpqError(.connectionFailed, "libpq could not allocate a connection") }
        let connection = LibpqConnection(handle: handle, connectionString: connectionString, wake: wake)
        try connection.completeConnect(deadline: .now + timeout)
        return connection
    }

    private func completeConnect(deadline: ContinuousClock.Instant) throws(LibpqError) {
        guard PQstatus(handle) != CONNECTION_BAD else { throw failure(.connectionFailed, prefix: "cannot connect") }
        var polling = PGRES_POLLING_WRITING
        while true {
            switch polling {
            case PGRES_POLLING_OK:
                return
            case PGRES_POLLING_FAILED:
                throw failure(.connectionFailed, prefix: "cannot connect")
            default:
                let events = polling == PGRES_POLLING_READING ? POLLIN : POLLOUT
                try waitForSocket(events: Int16(events), deadline: deadline, action: "connecting")
                polling = PQconnectPoll(handle)
            }
        }
    }

    /// Runs one or more statements and returns the last statement's result.
    ///
    /// With `parameters`, `sql` must be a single statement using `$1`, `$2`, ...
    @discardableResult
    public func execute(
        _ sql: String,
        parameters: [String?] = [],
        timeout: Duration? = nil
    ) throws(LibpqError) -> QueryResult {
        let sent: Int32
        if parameters.isEmpty {
            sent = PQsendQuery(handle, sql)
        } else {
            sent = withOptionalCStrings(parameters) { values in
                PQsendQueryParams(handle, sql, Int32(parameters.count), nil, values, nil, nil, 0)
            }
        }
        guard sent == 1 else { throw failure(.connectionLost, prefix: "cannot send query") }
        return try results(deadline: (timeout ?? queryTimeout).map { ContinuousClock.now + $0 })
    }

    /// Runs one statement that this session prepares the first time it is
    /// named: the server parses and analyses it once, which a statement run
    /// a thousand times a second would otherwise pay each time.
    ///
    /// `sql` must be the same for every call with one `name`.
    @discardableResult
    public func execute(
        prepared name: String,
        _ sql: String,
        parameters: [String?],
        timeout: Duration? = nil
    ) throws(LibpqError) -> QueryResult {
        let deadline = (timeout ?? queryTimeout).map { ContinuousClock.now + $0 }
        if !preparedStatements.contains(name) {
            guard PQsendPrepare(handle, name, sql, Int32(parameters.count), nil) == 1 else {
                throw failure(.connectionLost, prefix: "cannot send query")
            }
            try results(deadline: deadline)
            preparedStatements.insert(name)
        }
        let sent = withOptionalCStrings(parameters) { values in
            PQsendQueryPrepared(handle, name, Int32(parameters.count), values, nil, nil, 0)
        }
        guard sent == 1 else { throw failure(.connectionLost, prefix: "cannot send query") }
        return try results(deadline: deadline)
    }

    /// Prepares `sql` (without parameters) as `name` the first time this
    /// session sees the name, for `EXECUTE name` in a script: the server
    /// parses and plans it once, not once per run.
    ///
    /// `sql` must be the same for every call with one `name`.
    public func prepareOnce(_ name: String, _ sql: String, timeout: Duration? = nil) throws(LibpqError) {
        guard !preparedStatements.contains(name) else { return }
        guard PQsendPrepare(handle, name, sql, 0, nil) == 1 else { throw failure(.connectionLost, prefix: "cannot send query") }
        try results(deadline: (timeout ?? queryTimeout).map { ContinuousClock.now + $0 })
        preparedStatements.insert(name)
    }

    /// Drops every statement this session prepared, so that each is planned
    /// afresh at its next run: a cached plan made while a table was small
    /// stays until something invalidates it.
    public func forgetPreparedStatements(timeout: Duration? = nil) throws(LibpqError) {
        guard !preparedStatements.isEmpty else { return }
        // Forgotten before the wait: a stop that interrupts it leaves the server to run it
        // all the same, and a statement still counted as prepared would then not exist.
        preparedStatements.removeAll()
        try execute("DEALLOCATE ALL", timeout: timeout)
    }

    /// Reads every result of the query sent last, and returns the last one's.
    @discardableResult
    private func results(deadline: ContinuousClock.Instant?) throws(LibpqError) -> QueryResult {
        let (results, firstError) = try allResults(deadline: deadline)
        if let firstError { throw firstError }
        return results.last ?? QueryResult(columns: [], rows: [], affectedRows: nil)
    }

    /// Runs a script of statements in one round trip: the result of each
    /// statement that ran, in order, and the error that stopped the rest.
    /// After an error inside `BEGIN`, the session is in a failed
    /// transaction until the caller ends it.
    public func executeScript(_ sql: String, timeout: Duration? = nil) throws(LibpqError) -> (results: [QueryResult], error: LibpqError?) {
        guard PQsendQuery(handle, sql) == 1 else { throw failure(.connectionLost, prefix: "cannot send query") }
        return try allResults(deadline: (timeout ?? queryTimeout).map { ContinuousClock.now + $0 })
    }

    /// Every successful result of the query sent last and its first error; a
    /// lost connection is thrown.
    private func allResults(deadline: ContinuousClock.Instant?) throws(LibpqError) -> ([QueryResult], LibpqError?) {
        while PQisBusy(handle) == 1 {
            try waitForSocket(events: Int16(POLLIN), deadline: deadline, action: "waiting for a query")
            guard PQconsumeInput(handle) == 1 else { throw failure(.connectionLost, prefix: "connection lost") }
        }
        var results: [QueryResult] = []
        var firstError: LibpqError?
        while let result = PQgetResult(handle) {
            defer { PQclear(result) }
            switch PQresultStatus(result) {
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
                results.append(Self.read(result))
            default:
                if firstError == nil { firstError = queryError(result) }
            }
            while PQisBusy(handle) == 1 {
                try waitForSocket(events: Int16(POLLIN), deadline: deadline, action: "waiting for a query")
                guard PQconsumeInput(handle) == 1 else { throw failure(.connectionLost, prefix: "connection lost") }
            }
        }
        // libpq reports a connection the server closed as a failed query; it is a lost connection.
        if let firstError, PQstatus(handle) == CONNECTION_BAD {
            throw LibpqError(.connectionLost, firstError.message, sqlState: firstError.sqlState)
        }
        return (results, firstError)
    }

    /// Quotes text as an SQL string literal, with libpq's rules.
    public func escapeLiteral(_ text: String) throws(LibpqError) -> String {
        guard let escaped = PQescapeLiteral(handle, text, text.utf8.count) else {
            throw failure(.queryFailed, prefix: "cannot quote literal")
        }
        defer { PQfreemem(escaped) }
        return String(cString: escaped)
    }

    /// Server notices and warnings received since the last call.
    public func takeNotices() -> [Notice] {
        defer { notices.notices.removeAll() }
        return notices.notices
    }

    /// The backend process id, for `pg_terminate_backend` and logs.
    public var backendPID: Int32 { PQbackendPID(handle) }

    /// Where this connection actually went, without secrets.
    public var endpointDescription: String {
        let host = PQhost(handle).map { String(cString: $0) } ?? "?"
        let port = PQport(handle).map { String(cString: $0) } ?? "?"
        let database = PQdb(handle).map { String(cString: $0) } ?? "?"
        return "host=\(host) port=\(port) dbname=\(database) user=\(user)"
    }

    /// The role this connection signed in as.
    public var user: String { PQuser(handle).map { String(cString: $0) } ?? "?" }

    var socket: Int32 { PQsocket(handle) }

    /// Lets waits run to completion after the wake signal fired: for the last
    /// statements of a graceful stop.
    func ignoreWakeSignal() {
        wake = nil
    }

    /// Waits for the results of a query that the wake signal interrupted and
    /// discards them, so that the connection can run another.
    func discardInterruptedQuery(until deadline: ContinuousClock.Instant) throws(LibpqError) {
        while true {
            while PQisBusy(handle) == 1 {
                try waitForSocket(events: Int16(POLLIN), deadline: deadline, action: "finishing an interrupted query")
                guard PQconsumeInput(handle) == 1 else { throw failure(.connectionLost, prefix: "connection lost") }
            }
            guard let result = PQgetResult(handle) else { return }
            PQclear(result)
        }
    }

    /// Quotes a name for use as an SQL identifier, with libpq's rules.
    public func escapeIdentifier(_ name: String) throws(LibpqError) -> String {
        guard let escaped = PQescapeIdentifier(handle, name, name.utf8.count) else {
            throw failure(.queryFailed, prefix: "cannot quote identifier")
        }
        defer { PQfreemem(escaped) }
        return String(cString: escaped)
    }

    func waitForSocket(events: Int16, deadline: ContinuousClock.Instant?, action: String) throws(LibpqError) {
        let outcome = WakeSignal.wait(for: socket, events: events, wake: wake, until: deadline)
        switch outcome {
        case .ready: return
        case .woken: throw LibpqError(.stopped, "stopped while \(action)")
        case .timedOut: throw LibpqError(.timedOut, "timed out while \(action) (\(connectionString))")
        }
    }

    func failure(_ code: LibpqError.Code, prefix: String) -> LibpqError {
        let detail = PQerrorMessage(handle).map { String(cString: $0) } ?? ""
        let message = LibpqError.oneLine(connectionString.redact(detail))
        return LibpqError(code, message.isEmpty ? "\(prefix) (\(connectionString))" : "\(prefix) (\(connectionString)): \(message)")
    }

    private func queryError(_ result: OpaquePointer) -> LibpqError {
        let field = { (code: UInt8) in PQresultErrorField(result, Int32(code)).map { String(cString: $0) } }
        var message = field(UInt8(ascii: "M")) ?? "query failed"
        if let detail = field(UInt8(ascii: "D")) { message += " (\(detail))" }
        if let hint = field(UInt8(ascii: "H")) { message += "; hint: \(hint)" }
        return LibpqError(
            .queryFailed,
            LibpqError.oneLine(connectionString.redact(message)),
            sqlState: field(UInt8(ascii: "C")),
            context: field(UInt8(ascii: "W")).map { LibpqError.oneLine(connectionString.redact($0)) }
        )
    }

    private static func read(_ result: OpaquePointer) -> QueryResult {
        let columnCount = PQnfields(result)
        let columns = (0..<columnCount).map { String(cString: PQfname(result, $0)) }
        let rows = (0..<PQntuples(result)).map { row in
            (0..<columnCount).map { column -> String? in
                PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column))
            }
        }
        let affected = Int(String(cString: PQcmdTuples(result)))
        return QueryResult(columns: columns, rows: rows, affectedRows: affected)
    }
}

/// Collects notices from libpq's C callback; touched only on the connection's thread.
private final class NoticeBuffer {
    var notices: [LibpqConnection.Notice] = []
}

private func withOptionalCStrings<Result>(
    _ strings: [String?],
    _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> Result
) -> Result {
    let copies = strings.map { $0.map { strdup($0) } ?? nil }
    defer { copies.forEach { free($0) } }
    let pointers = copies.map { UnsafePointer($0) } + [nil]
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
