extension SessionRoute {
    /// How `connection`, opened with `conninfo`, reaches PostgreSQL, and its
    /// server backend's pid. Behind a pooler, a second client asks while
    /// `connection` sits idle: a pooler that shares sessions hands it the same
    /// server session (PgBouncer gives back the session it was handed last).
    static func detect(
        on connection: LibpqConnection, conninfo: ConnectionString, timeout: Duration, wake: WakeSignal?
    ) throws(LibpqError) -> (route: SessionRoute, serverPID: Int32) {
        let serverPID = try backendPID(seenBy: connection)
        guard serverPID != connection.backendPID else { return (.direct, serverPID) }
        let other = try LibpqConnection.connect(conninfo, timeout: timeout, applicationName: "pgherald-probe", wake: wake)
        var seen: [Int32] = []
        for _ in 0..<3 { seen.append(try backendPID(seenBy: other)) }
        return (classify(reportedPID: connection.backendPID, serverPID: serverPID, otherClientServerPIDs: seen), serverPID)
    }

    /// Connects with `conninfo` as the listener would and says how it reaches PostgreSQL, for `check-config --connect`.
    public static func detect(_ conninfo: ConnectionString, timeout: Duration) throws(LibpqError) -> (route: SessionRoute, serverPID: Int32) {
        let connection = try LibpqConnection.connect(conninfo, timeout: timeout, applicationName: "pgherald-check")
        return try detect(on: connection, conninfo: conninfo, timeout: timeout, wake: nil)
    }

    /// Why serve refuses a transaction pooler, and what to do instead.
    public static func sharedSessionMessage(endpoint: String, serverPID: Int32) -> String {
        "\(endpoint) is a connection pooler in transaction or statement mode: it gave this "
            + "connection's server session (backend \(serverPID)) to another client between statements, so a LISTEN "
            + "would hear nothing. LISTEN needs a session of its own: connect serve straight to PostgreSQL, use a "
            + "session-mode pool, or give the listener its own conninfo (listen_database: in the configuration, "
            + "--listen-db on the command line) while the other queries go through the pool"
    }

    private static func backendPID(seenBy connection: LibpqConnection) throws(LibpqError) -> Int32 {
        Int32(try connection.execute("SELECT pg_backend_pid()").scalar ?? "") ?? 0
    }
}
