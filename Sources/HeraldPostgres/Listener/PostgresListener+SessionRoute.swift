extension PostgresListener {
    /// Finds out whether `connection` goes through a pooler, and refuses one
    /// that shares server sessions, before anything is LISTENed or locked on it.
    func checkSessionRoute(of connection: PostgresConnection, deadline: ContinuousClock.Instant) throws(PostgresError) {
        let (route, serverPID) = try SessionRoute.detect(
            on: connection, conninfo: configuration.connection, timeout: ContinuousClock.now.duration(to: deadline), wake: wake
        )
        switch route {
        case .transactionPooler:
            throw PostgresError(.sharedSession, SessionRoute.sharedSessionMessage(endpoint: connection.endpointDescription, serverPID: serverPID))
        case .sessionPooler:
            logger.info("connected through a session-mode pooler: LISTEN keeps its server session", metadata: [
                "server_backend_pid": "\(serverPID)",
            ])
        case .direct:
            break
        }
    }
}
