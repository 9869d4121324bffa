/// Why the daemon ended a stream before its client did, and the last frame that says so.
package enum StreamEnding: Sendable, Equatable {
    /// Its access grant changed on a reload, or the daemon can no longer
    /// check what it may see: reconnecting gets the new grant, or 403.
    case revoked(String)
    /// Its token expired: reconnecting with a fresh token goes on where it stopped.
    case tokenExpired(String)

    /// The stream's last frame, `event: revoked` or `event: token_expired`.
    package func frame(in format: StreamFormat) -> String {
        switch self {
        case .revoked(let reason): format.revokedFrame(reason: reason)
        case .tokenExpired(let reason): format.tokenExpiredFrame(reason: reason)
        }
    }
}
