/// Why the daemon ended a stream before its client did, and the last frame that says so.
package enum StreamEnding: Sendable, Equatable {
    /// Its access grant changed on a reload, or the daemon can no longer
    /// check what it may see: reconnecting gets the new grant, or 403.
    case revoked(String)
    /// Its token expired: reconnecting with a fresh token goes on where it stopped.
    case tokenExpired(String)
    /// The row-level security checks for its identity stopped (they fell
    /// behind, failed or cannot run): reconnecting with `Last-Event-ID` resumes from the journal.
    case interrupted(String)

    /// The stream's last frame, `event: revoked`, `event: token_expired` or `event: interrupted`.
    package func frame(in format: StreamFormat) -> String {
        switch self {
        case .revoked(let reason): format.revokedFrame(reason: reason)
        case .tokenExpired(let reason): format.tokenExpiredFrame(reason: reason)
        case .interrupted(let reason): format.interruptedFrame(reason: reason)
        }
    }
}
