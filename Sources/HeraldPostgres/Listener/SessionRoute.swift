/// How the listener's connection reaches PostgreSQL, as far as LISTEN cares.
///
/// A pooler answers the connection with a backend process id of its own,
/// not the server's. One in transaction or statement mode hands the server
/// session back to its pool as soon as a statement ends, and the LISTEN with
/// it: the next client gets the notifications, and the daemon hears nothing.
public enum SessionRoute: Sendable, Hashable {
    /// Straight to the server.
    case direct
    /// Through a pooler that keeps one server session per client (PgBouncer's
    /// session mode): LISTEN works.
    case sessionPooler
    /// Through a pooler that shares server sessions between transactions or
    /// statements: LISTEN cannot work.
    case transactionPooler

    /// Classifies a connection from what it saw.
    ///
    /// - Parameters:
    ///   - reportedPID: the backend pid libpq was told at connect (`PQbackendPID`).
    ///   - serverPID: `pg_backend_pid()` on the same connection.
    ///   - otherClientServerPIDs: `pg_backend_pid()` as another client of
    ///     the same conninfo saw it while this connection sat idle. A pooler
    ///     that hands this connection's server session to another client
    ///     shares sessions.
    public static func classify(reportedPID: Int32, serverPID: Int32, otherClientServerPIDs: [Int32]) -> SessionRoute {
        if reportedPID == serverPID { return .direct }
        return otherClientServerPIDs.contains(serverPID) ? .transactionPooler : .sessionPooler
    }
}
