extension PostgresListener {
    /// Finds out whether `connection` goes through a pooler, and refuses one
    /// that shares server sessions, before anything is LISTENed or locked on it.
    func checkSessionRoute(of connection: LibpqConnection, deadline: ContinuousClock.Instant) throws(LibpqError) {
        let (route, serverPID) = try SessionRoute.detect(
            on: connection, conninfo: configuration.connection, timeout: ContinuousClock.now.duration(to: deadline), wake: wake
        )
        switch route {
        case .transactionPooler:
            throw LibpqError(.sharedSession, SessionRoute.sharedSessionMessage(endpoint: connection.endpointDescription, serverPID: serverPID))
        case .sessionPooler:
            logger.info("connected through a session-mode pooler: LISTEN keeps its server session", metadata: [
                "server_backend_pid": "\(serverPID)",
            ])
        case .direct:
            break
        }
    }
}
