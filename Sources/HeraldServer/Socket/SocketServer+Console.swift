import Foundation
import HTTPTypes
import Herald
import HeraldOutput
import HeraldRealtime
import Hummingbird
import HummingbirdCore
import NIOCore

extension SocketServer {
    /// Who is asking, on either listener, and what they may see and do:
    /// by key on the console's TCP listener, by the peer's access rules on the socket.
    struct Viewer: Sendable {
        /// For logs: `key console`, `key NAME`, or the socket peer.
        let name: String
        let scope: AccessScope
        /// The socket peer, when the access rules read it; nil on TCP.
        var peer: PeerCredentials? = nil
        /// Replaying a dead letter: the console key, or on the Unix socket a peer that sees everything.
        let mayControl: Bool
    }

    /// What `GET /console/state` answers, once a second at most per open console.
    struct ConsoleState: Encodable {
        let viewer: String
        let mayControl: Bool
        let statistics: DaemonStatistics
        /// Given only to viewers that see every table: a dead letter names events of any table.
        let deadLetters: [DeadLetterSummary]?
    }

    /// Whether `channel` came in through the console's TCP listener rather than the Unix socket.
    static func isConsoleListener(_ channel: any Channel) -> Bool {
        switch channel.localAddress {
        case .v4?, .v6?: true
        case .unixDomainSocket?, nil: false
        }
    }

    /// The key a request presents: `Authorization: Bearer KEY`, or `?key=`,
    /// which is all an `EventSource` can send.
    static func presentedKey(_ head: HTTPRequest) -> String? {
        if let authorization = head.headerFields[.authorization], authorization.hasPrefix("Bearer ") {
            return String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        }
        return URI(head.path ?? "").queryParameters.first { $0.key == "key" }.map { String($0.value) }
    }

    /// The viewer on the console's TCP listener: the console key sees
    /// everything and may use the controls; a `realtime.keys` key sees what its
    /// grant covers. Anything else is refused with 401.
    func consoleViewer(presenting key: String?) -> Result<Viewer, StreamRefusal> {
        guard let key, !key.isEmpty else {
            return .failure(StreamRefusal(status: .unauthorized, body: ErrorBody(code: "key_required", message: "the console on TCP asks for a key: console.key, or one of realtime.keys")))
        }
        var keys = realtime?.credentials.withLock { $0.keys } ?? []
        if let consoleKey = configuration.console?.key { keys.append(consoleKey) }
        do {
            let identity = try RealtimeCredentials(keys: keys).identify(key, now: Date().timeIntervalSince1970)
            let isConsoleKey = configuration.console?.key.map { identity.name == "key \($0.name)" } ?? false
            return .success(Viewer(name: identity.name, scope: identity.scope, mayControl: isConsoleKey))
        } catch {
            logger.notice("refused a console viewer: wrong key", metadata: ["reason": "\(error)"])
            return .failure(StreamRefusal(status: .unauthorized, body: ErrorBody(code: "wrong_key", message: "the key is not the console's key or one of realtime.keys")))
        }
    }

    /// The viewer of a request on either listener: by key on TCP, by the
    /// peer's access rules on the Unix socket.
    func viewer(of head: HTTPRequest, channel: any Channel) async -> Result<Viewer, StreamRefusal> {
        if Self.isConsoleListener(channel) { return consoleViewer(presenting: Self.presentedKey(head)) }
        let policy = access.withLock { $0 }
        let peer = policy == nil ? nil : await PeerCredentials.of(channel)
        let (scope, identity) = scope(of: peer, under: policy)
        return .success(Viewer(
            name: identity.map { "peer \($0)" } ?? "socket peer", scope: scope, peer: peer, mayControl: scope == .everything
        ))
    }

    /// `/console`, its assets, its state and its controls. On the TCP
    /// listener, `GET /` leads to the console too.
    func addConsoleRoutes(to router: Router<SocketRequestContext>, onTCP: Bool) {
        if onTCP {
            router.get("/") { _, _ in Response.redirect(to: "/console") }
        }
        router.get("console") { _, _ in ConsolePage.response(ConsolePage.html, contentType: "text/html; charset=utf-8") }
        router.get("console/app.js") { _, _ in ConsolePage.response(ConsolePage.script, contentType: "text/javascript; charset=utf-8") }
        router.get("console/app.css") { _, _ in ConsolePage.response(ConsolePage.style, contentType: "text/css; charset=utf-8") }
        router.get("console/state") { request, context in
            let viewer: Viewer
            switch await self.viewer(of: request.head, channel: context.channel) {
            case .success(let found): viewer = found
            case .failure(let refusal): return Response.json(refusal.status, refusal.body)
            }
            // Measuring the journal scans up to 100,000 rows: once every 15 s is plenty for a page open all day.
            var statistics = self.statistics(journal: await self.maintenance?.statistics(maximumAge: .seconds(15)), visibleTo: viewer.scope)
            await self.narrowQueries(&statistics, to: viewer.scope)
            let deadLetters = viewer.scope == .everything ? await self.deadLetterSummaries() : nil
            return Response.json(.ok, ConsoleState(viewer: viewer.name, mayControl: viewer.mayControl, statistics: statistics, deadLetters: deadLetters))
        }
        router.post("console/dead-letters/:id/replay") { request, context in
            let viewer: Viewer
            switch await self.viewer(of: request.head, channel: context.channel) {
            case .success(let found): viewer = found
            case .failure(let refusal): return Response.json(refusal.status, refusal.body)
            }
            let id = context.parameters.get("id").flatMap { Int64($0) }
            guard viewer.mayControl else {
                self.logger.notice("refused a replay from the console: the viewer may not use the controls", metadata: [
                    "viewer": "\(viewer.name)", "dead_letter": "\(id.map(String.init) ?? "?")",
                ])
                return Response.json(.forbidden, ErrorBody(code: "forbidden", message: "replaying needs the console key, or on the socket a peer that sees every table"))
            }
            guard let id else { return Response.json(.badRequest, ErrorBody(code: "bad_id", message: "a dead letter's id is a number")) }
            guard let queue = self.deadLetterQueue else {
                return Response.json(.notFound, ErrorBody(code: "no_dead_letters", message: "no output keeps dead letters (webhooks: is not configured)"))
            }
            do {
                let replayed = try await queue.replayDeadLetter(id: id)
                self.logger.notice("replayed a dead letter from the console", metadata: ["viewer": "\(viewer.name)", "dead_letter": "\(id)", "queued": "\(replayed)"])
                return replayed
                    ? Response.json(.ok, ["replayed": id])
                    : Response.json(.notFound, ErrorBody(code: "not_found", message: "no dead letter \(id); it may have been replayed already"))
            } catch {
                return Response.json(.serviceUnavailable, ErrorBody(code: "replay_failed", message: "\(error)"))
            }
        }
    }

    /// The output that keeps dead letters, if any does.
    var deadLetterQueue: (any DeadLetterQueue)? {
        outputs.all.lazy.compactMap { $0 as? any DeadLetterQueue }.first
    }

    /// The oldest 100 dead letters, read at most once a second however many consoles are open.
    private func deadLetterSummaries() async -> [DeadLetterSummary]? {
        guard let queue = deadLetterQueue else { return nil }
        if let cached = recentDeadLetters.withLock({ $0 }), ContinuousClock.now - cached.at < .seconds(1) { return cached.letters }
        do {
            let letters = try await queue.deadLetterSummaries(limit: 100)
            recentDeadLetters.withLock { $0 = (.now, letters) }
            return letters
        } catch {
            logger.warning("cannot read the dead letters for the console", metadata: ["error": "\(error)"])
            return nil
        }
    }
}
