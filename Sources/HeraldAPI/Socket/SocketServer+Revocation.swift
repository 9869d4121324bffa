import Foundation
import Herald
import HeraldRealtime

extension SocketServer {
    /// The credentials a network request is checked against: the realtime
    /// keys and tokens, and the console's key.
    func networkCredentials(_ realtimeCredentials: RealtimeCredentials?) -> RealtimeCredentials {
        var credentials = realtimeCredentials ?? RealtimeCredentials()
        if let consoleKey = configuration.console?.key { credentials.keys.append(consoleKey) }
        return credentials
    }

    /// Checks the key or token of every stream opened over the network again,
    /// under the credentials a reload applied: a stream whose key or JWT role
    /// is gone, or whose grant changed, ends at once with `event: revoked`
    /// saying why; its client reconnects under what the new grant allows.
    /// Returns how many ended.
    @discardableResult
    func revokeStreams(under realtimeCredentials: RealtimeCredentials) -> Int {
        let credentials = networkCredentials(realtimeCredentials)
        let streams: [any GrantedStream] = trackedStreams.withLock { Array($0.byID.values) + Array($0.queries.values) }
        let now = Date().timeIntervalSince1970
        var revoked = 0
        for stream in streams {
            guard let token = stream.presentedToken else { continue }
            let reason: String
            do {
                let identity = try credentials.identify(token, now: now)
                guard let refusal = stream.refusal(under: identity.scope, who: identity.name) else { continue }
                reason = "a reload of the configuration changed what it may see: \(refusal)"
            } catch {
                reason = "a reload of the configuration revoked its key or token: \(error.message)"
            }
            stream.finish(.revoked(reason))
            revoked += 1
        }
        if revoked > 0 { logger.notice("ended streams whose credentials a reload revoked or changed", metadata: ["streams": "\(revoked)"]) }
        return revoked
    }
}
