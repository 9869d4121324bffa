extension PostgresListener {
    /// Finds out whether `connection` goes through a pooler, and refuses one
    /// that shares server sessions, before anything is LISTENed or locked on it.
    func checkSessionRoute(of connection: PostgresConnection, deadline: ContinuousClock.Instant) throws(PostgresError) {
        let serverPID = try backendPID(seenBy: connection)
        guard serverPID != connection.backendPID else { return }
        // A pooler: a second client, asking while this connection sits idle,
        // is handed its server session if the pooler shares sessions (PgBouncer
        // gives back the session it was handed last).
        let other = try PostgresConnection.connect(
            configuration.connection, timeout: ContinuousClock.now.duration(to: deadline), applicationName: "pgherald-probe", wake: wake
        )
        var seen: [Int32] = []
        for _ in 0..<3 { seen.append(try backendPID(seenBy: other)) }
        let route = SessionRoute.classify(reportedPID: connection.backendPID, serverPID: serverPID, otherClientServerPIDs: seen)
        switch route {
        case .transactionPooler:
            throw PostgresError(
                .sharedSession,
                "\(connection.endpointDescription) is a connection pooler in transaction or statement mode: it gave this "
                    + "connection's server session (backend \(serverPID)) to another client between statements, so a LISTEN "
                    + "would hear nothing. LISTEN needs a session of its own: connect serve straight to PostgreSQL, use a "
                    + "session-mode pool, or give the listener its own conninfo (listen_database: in the configuration, "
                    + "--listen-db on the command line) while the other queries go through the pool"
            )
        case .sessionPooler:
            logger.info("connected through a session-mode pooler: LISTEN keeps its server session", metadata: [
                "server_backend_pid": "\(serverPID)",
            ])
        case .direct:
            break
        }
    }

    private func backendPID(seenBy connection: PostgresConnection) throws(PostgresError) -> Int32 {
        Int32(try connection.execute("SELECT pg_backend_pid()").rows.first?[0] ?? "") ?? 0
    }
}
