public import Herald
import HeraldHTTP
import HeraldSupabase
import Hummingbird
import NIOCore
import Synchronization

extension SocketServer {
    /// A stream a reload of the access rules checks: `/events` or `/queries`.
    protocol GrantedStream: AnyObject, Sendable {
        /// Nil when the stream opened without access rules, so its peer was not read.
        var peer: PeerCredentials? { get }
        /// The key or token that opened it over the network, which a reload
        /// of the credentials checks again; nil on the Unix socket, where the
        /// access rules decide.
        var presentedToken: String? { get }
        /// Why the stream may not go on under `scope`, the grant of `who`; nil when it may.
        func refusal(under scope: AccessScope, who: String) -> String?
        /// Ends the stream after what is buffered; its last frame says why.
        func finish(_ ending: StreamEnding)
    }

    /// One open stream, kept so that a reload can check it against the new grant.
    final class OpenStream: GrantedStream {
        let peer: PeerCredentials?
        let presentedToken: String?
        /// The filter as the client asked for it, and as its grant narrowed it.
        let requested: EventFilter
        let granted: EventFilter
        private let state: Mutex<State>

        private struct State {
            /// Nil while the stream catches up from the broker's history.
            var subscription: Subscription?
            var ending: StreamEnding?
            var isEnded = false
        }

        init(peer: PeerCredentials?, requested: EventFilter, granted: EventFilter, subscription: Subscription, presentedToken: String?) {
            self.peer = peer
            self.presentedToken = presentedToken
            self.requested = requested
            self.granted = granted
            self.state = Mutex(State(subscription: subscription))
        }

        /// Why the daemon ended the stream, if it did before its shutdown.
        var ending: StreamEnding? { state.withLock { $0.ending } }

        /// Whether a reload or the shutdown has ended the stream.
        var isEnded: Bool { state.withLock { $0.isEnded } }

        func revoke(_ reason: String) {
            finish(.revoked(reason))
        }

        /// Ends the stream because its identity's row-level security checks stopped.
        func interrupt(_ reason: String) {
            finish(.interrupted(reason))
        }

        /// Its filter narrowed differently under `scope`, or refused there.
        func refusal(under scope: AccessScope, who: String) -> String? {
            do {
                return try requested.narrowed(to: scope) == granted ? nil : "the access grant of \(who) changed"
            } catch {
                return "\(who): \(error.message)"
            }
        }

        /// Ends the stream after what is buffered, as at the daemon's shutdown.
        func end() {
            close(with: nil)
        }

        func finish(_ ending: StreamEnding) {
            close(with: ending)
        }

        private func close(with ending: StreamEnding?) {
            let subscription = state.withLock { state in
                if let ending { state.ending = ending }
                state.isEnded = true
                return state.subscription
            }
            subscription?.cancel()
        }

        /// The stream's subscription is now `subscription` (nil while it
        /// catches up from the history); false, with `subscription`
        /// cancelled, when the stream has ended meanwhile.
        func replaceSubscription(with subscription: Subscription?) -> Bool {
            let ended = state.withLock { state in
                state.subscription = subscription
                return state.isEnded
            }
            if ended { subscription?.cancel() }
            return !ended
        }
    }

    /// What `peer` may see under `policy`, and who it is: everything without
    /// a policy; nothing when the kernel could not say who the peer is.
    func scope(of peer: PeerCredentials?, under policy: AccessPolicy?) -> (scope: AccessScope, identity: PeerIdentity?) {
        guard let policy else { return (.everything, nil) }
        guard let peer else { return (.grants([], rules: []), nil) }
        let identity = peer.identity()
        return (policy.scope(for: identity), identity)
    }

    /// The peer on `channel` as a realtime caller: its grant under the
    /// access rules, and its identity (pid included, so a rejoin resumes only
    /// within the same client process).
    func realtimeCaller(on channel: any Channel) async -> RealtimeCaller {
        let policy = access.withLock { $0 }
        let peer = await PeerCredentials.of(channel)
        let (scope, identity) = scope(of: peer, under: policy)
        let name = identity?.description ?? peer.map { "uid \($0.userID), pid \($0.processID)" } ?? "socket peer"
        return RealtimeCaller(name: name, scope: scope, expiresAt: nil, presentedKey: nil, peer: peer)
    }

    /// The scope of the peer on `channel`, for `/stats` and `/metrics`.
    func scope(of channel: any Channel) async -> AccessScope {
        guard let policy = access.withLock({ $0 }) else { return .everything }
        return scope(of: await PeerCredentials.of(channel), under: policy).scope
    }

    /// Applies a new `access:` section: new streams get it at once, and open
    /// streams whose grant it changes are closed with `event: revoked`, as
    /// are all streams opened without a section (their peers were not read).
    /// Realtime channels of socket peers follow their new grant, and end when
    /// a binding falls outside it. Taking the section away closes nothing:
    /// every stream then may see more.
    public func apply(access policy: AccessPolicy?) {
        access.withLock { $0 = policy }
        guard let policy else { return }
        let streams: [any GrantedStream] = trackedStreams.withLock { Array($0.byID.values) + Array($0.queries.values) }
        var identities: [PeerCredentials: PeerIdentity] = [:]
        var revoked = 0
        for stream in streams where stream.presentedToken == nil {
            let reason: String
            if let peer = stream.peer {
                let identity = identities[peer] ?? peer.identity()
                identities[peer] = identity
                guard let refusal = stream.refusal(under: policy.scope(for: identity), who: "\(identity)") else { continue }
                reason = refusal
            } else {
                reason = "access rules now apply"
            }
            stream.finish(.revoked(reason))
            revoked += 1
        }
        let channelsEnded = realtime?.apply { peer in scope(of: peer, under: policy) } ?? 0
        logger.info("applied the access rules", metadata: [
            "rules": "\(policy.rules.count)", "streams_closed": "\(revoked)", "realtime_channels_closed": "\(channelsEnded)",
        ])
    }
}
