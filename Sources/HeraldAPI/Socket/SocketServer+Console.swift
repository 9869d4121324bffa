import Foundation
import HTTPTypes
import Herald
import HeraldConsole
import HeraldHTTP
import HeraldOutput
import HeraldRealtime
import Hummingbird
import HummingbirdCore
import NIOCore

extension SocketServer {
    /// Who is asking, on any listener, and what they may see and do: by key
    /// or token on TCP, by the peer's access rules on the socket.
    struct Viewer: Sendable {
        /// For logs: `the console key`, `key NAME`, a token's subject, or the socket peer.
        let name: String
        let scope: AccessScope
        /// The socket peer, when the access rules read it; nil on TCP.
        var peer: PeerCredentials? = nil
        /// The operator's right: replaying a dead letter, and `/stats` and
        /// `/metrics` on TCP. The console key has it; on the Unix socket, a
        /// peer that sees everything.
        let mayControl: Bool
        /// A token's expiry, in seconds since 1970: its streams end then.
        var expiresAt: Double? = nil
        /// The key or user of a `realtime.keys` key or `realtime.jwt` token, whose share of the
        /// daemon's streams and live queries it takes; nil for the console key and on the Unix socket.
        var consumer: RealtimeConsumer? = nil

        /// A key, or a token without `sub`, that many clients may share: its limits are a key's, not a user's.
        var sharedCredential: Bool { consumer.map { !$0.isUser } ?? false }
    }

    /// What `GET /console/state` answers, once a second at most per open console.
    struct ConsoleState: Encodable {
        let viewer: String
        let mayControl: Bool
        let statistics: DaemonStatistics
        /// Given only to viewers that see every table: a dead letter names events of any table.
        let deadLetters: [DeadLetterSummary]?
    }

    /// Whether `channel` came in over TCP (the network listener or the
    /// console's) rather than the Unix socket. An HTTP/2 stream answers for its connection.
    static func isNetworkListener(_ channel: any Channel) -> Bool {
        switch channel.localAddress {
        case .v4?, .v6?: true
        case .unixDomainSocket?, nil: false
        }
    }

    /// The key or token a request presents: `Authorization: Bearer TOKEN`,
    /// or `?access_token=` (or the console's `?key=`), which is all an
    /// `EventSource` can send. Never logged.
    static func presentedToken(_ head: HTTPRequest) -> String? {
        if let authorization = head.headerFields[.authorization], authorization.hasPrefix("Bearer ") {
            return String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        }
        let query = URI(head.path ?? "").queryParameters
        return (query["access_token"] ?? query["key"]).map(String.init)
    }

    /// The viewer on TCP: the console key sees everything and has the
    /// operator's right; a `realtime.keys` key or a `realtime.jwt` token sees
    /// what its grant covers, under row-level security when its role says
    /// so. Anything else is refused with 401 and a JSON reason.
    func networkViewer(presenting token: String?) -> Result<Viewer, StreamRefusal> {
        guard let token, !token.isEmpty else {
            return .failure(StreamRefusal(status: .unauthorized, body: ErrorBody(
                code: "token_required", message: "pgherald over the network asks for a token: Authorization: Bearer TOKEN, or ?access_token=TOKEN"
            )))
        }
        // The operator's right comes from the console key's secret, never from a name another key could have.
        if let consoleKey = configuration.console?.key, consoleKey.admits(token) {
            return .success(Viewer(name: "the console key", scope: .everything, mayControl: true, expiresAt: nil))
        }
        let credentials = realtime?.credentials.withLock { $0 } ?? RealtimeCredentials()
        do {
            let identity = try credentials.identify(token, now: Date().timeIntervalSince1970)
            return .success(Viewer(
                name: identity.name, scope: identity.scope, mayControl: false, expiresAt: identity.expiresAt, consumer: identity.consumer
            ))
        } catch {
            metrics?.recordRefusal(status: 401)
            logger.notice("refused a request over the network: its token", metadata: ["code": "\(error.code.rawValue)", "reason": "\(error.message)"])
            let message = error.code == .unknownKey
                ? "the token is not the console's key, one of realtime.keys, or a realtime.jwt token"
                : error.message
            return .failure(StreamRefusal(status: .unauthorized, body: ErrorBody(code: error.code.rawValue, message: message)))
        }
    }

    /// The viewer of a request on any listener: by key or token on TCP, by
    /// the peer's access rules on the Unix socket.
    func viewer(of head: HTTPRequest, channel: any Channel) async -> Result<Viewer, StreamRefusal> {
        if Self.isNetworkListener(channel) { return networkViewer(presenting: Self.presentedToken(head)) }
        let policy = access.withLock { $0 }
        let peer = policy == nil ? nil : await PeerCredentials.of(channel)
        let (scope, identity) = scope(of: peer, under: policy)
        return .success(Viewer(
            name: identity.map { "peer \($0)" } ?? "socket peer", scope: scope, peer: peer, mayControl: scope == .everything
        ))
    }

    /// The console's viewer: over the network, the console key or one of
    /// `realtime.keys`, as docs/console.md says; a user's token
    /// (`realtime.jwt`) reads its rows through `/events`, never the
    /// daemon's figures (journal, outputs, other users' live queries).
    func consoleViewer(of head: HTTPRequest, channel: any Channel) async -> Result<Viewer, StreamRefusal> {
        let found = await viewer(of: head, channel: channel)
        guard case .success = found, Self.isNetworkListener(channel), let token = Self.presentedToken(head) else { return found }
        let isKey = configuration.console?.key?.admits(token) == true
            || (realtime?.credentials.withLock { $0.keys.contains { $0.admits(token) } } ?? false)
        guard !isKey else { return found }
        metrics?.recordRefusal(status: 403)
        return .failure(StreamRefusal(status: .forbidden, body: ErrorBody(
            code: "console_needs_a_key", message: "the console over the network takes console.key or one of realtime.keys, not a user's token"
        )))
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
            switch await self.consoleViewer(of: request.head, channel: context.channel) {
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
            switch await self.consoleViewer(of: request.head, channel: context.channel) {
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
