import Herald
import HeraldHTTP
import HeraldPostgres
import Hummingbird
import NIOCore
import Synchronization

extension SocketServer {
    /// One open `GET /queries/NAME`, kept so that a reload of the access
    /// rules can check it and shutdown can end it.
    final class QueryStream: GrantedStream {
        let peer: PeerCredentials?
        let presentedToken: String?
        let name: String
        let tables: [TableName]
        /// For a query that runs as its subscriber: the identity it runs as.
        let rowSecurity: RowSecurityIdentity?
        let runsAsSubscriber: Bool
        let subscription: LiveQuerySubscription
        private let ending = Mutex<StreamEnding?>(nil)

        init(
            peer: PeerCredentials?, presentedToken: String?, name: String, tables: [TableName], runsAsSubscriber: Bool, rowSecurity: RowSecurityIdentity?,
            subscription: LiveQuerySubscription
        ) {
            self.peer = peer
            self.presentedToken = presentedToken
            self.name = name
            self.tables = tables
            self.runsAsSubscriber = runsAsSubscriber
            self.rowSecurity = rowSecurity
            self.subscription = subscription
        }

        /// Why the daemon ended the stream, if it did.
        var endedBecause: StreamEnding? { ending.withLock { $0 } }

        func finish(_ ending: StreamEnding) {
            self.ending.withLock { $0 = ending }
            subscription.cancel()
        }

        /// The query, or a table it reads, no longer granted.
        func refusal(under scope: AccessScope, who: String) -> String? {
            if runsAsSubscriber, scope.rowSecurity != rowSecurity { return "\(who): its row-level security identity changed" }
            return scope.refusal(ofQuery: name, reading: tables, runsAsSubscriber: runsAsSubscriber).map { "\(who): \($0)" }
        }
    }

    /// Hands the first update's iterator from the handler to the response
    /// body. `@unchecked Sendable` because the invariant is kept by hand:
    /// the handler stops using it before the body, the only other user, starts.
    private final class UpdateIterator: @unchecked Sendable {
        var iterator: LiveQuerySubscription.AsyncIterator

        init(_ iterator: LiveQuerySubscription.AsyncIterator) {
            self.iterator = iterator
        }
    }

    func addQueryRoutes(to router: Router<SocketRequestContext>) {
        router.get("queries/:name") { request, context in
            await self.queryStream(request, context: context)
        }
    }

    /// `GET /queries/NAME?PARAM=VALUE`: the query's whole result, then its
    /// differences as they happen, as SSE or NDJSON (as `/events` chooses).
    /// `Last-Event-ID` resumes from a result the daemon still holds.
    private func queryStream(_ request: Request, context: SocketRequestContext) async -> Response {
        guard let engine = outputs.first(LiveQueryOutput.self)?.engine else {
            return refusal(.notFound, "unknown_query", "no live queries are configured (queries: in the configuration)")
        }
        let name = context.parameters.get("name") ?? ""
        let items = request.uri.queryParameters.map { (name: String($0.key), value: String($0.value)) }
        let format: StreamFormat
        do {
            try Self.refuseRepeats(of: ["format", "key", "access_token"], in: items)
            format = try Self.streamFormat(items: items, accept: request.headers[.accept])
        } catch {
            return refusal(.badRequest, "malformed", error.message)
        }
        var parameters: [String: String] = [:]
        for item in items where !["format", "access_token", "key"].contains(item.name) {
            guard parameters.updateValue(item.value, forKey: item.name) == nil else {
                return refusal(.badRequest, LiveQueryError.Code.badParameters.rawValue, "the parameter \(item.name) is given twice")
            }
        }
        let viewer: Viewer
        switch await self.viewer(of: request.head, channel: context.channel) {
        case .success(let found): viewer = found
        case .failure(let refusal): return Response.json(refusal.status, refusal.body)
        }
        let tables: [TableName]
        do {
            tables = try await engine.tables(of: name)
        } catch {
            return refusal(error)
        }
        let scope = viewer.scope
        let runsAsSubscriber = engine.definitions[name]?.runsAsSubscriber ?? false
        if let reason = scope.refusal(ofQuery: name, reading: tables, runsAsSubscriber: runsAsSubscriber) {
            logger.notice("refused a live query outside the peer's grant", metadata: [
                "peer": "\(viewer.name)", "reason": "\(reason)",
            ])
            return refusal(LiveQueryError(.forbidden, reason))
        }
        if trackedStreams.withLock({ $0.isShuttingDown }) {
            return refusal(.serviceUnavailable, "shutting_down", "the daemon is shutting down")
        }
        guard let definition = engine.definitions[name] else { return refusal(LiveQueryError(.unknownQuery, "no live query is named \(name)")) }
        let values: [String]
        do {
            values = try definition.boundValues(parameters)
        } catch {
            return refusal(error)
        }
        if let reason = parameterSets.withLock({ $0.open(values, of: definition, by: viewer.name, shared: viewer.sharedCredential) }) {
            logger.notice("refused a live query: too many sets of parameters", metadata: ["peer": "\(viewer.name)", "query": "\(name)"])
            return refusal(.tooManyRequests, "too_many_parameter_sets", reason)
        }
        let releaseSet = { [self, caller = viewer.name] in parameterSets.withLock { $0.close(values, of: name, by: caller) } }
        let slot: StreamSlot
        switch reserveStream(for: viewer, on: context.channel) {
        case .success(let reserved): slot = reserved
        case .failure(let refused):
            releaseSet()
            logger.notice("refused a live query: its holder's share of streams", metadata: ["viewer": "\(viewer.name)", "reason": "\(refused.message)"])
            return refusal(refused.status, refused.code, refused.message)
        }
        let subscription: LiveQuerySubscription
        let updates: UpdateIterator
        let first: LiveQueryUpdate
        do {
            subscription = try await engine.subscribe(
                name, parameters: parameters, resumingAfter: request.headers[StreamRequest.lastEventID], as: scope.rowSecurity
            )
            updates = UpdateIterator(subscription.makeAsyncIterator())
            guard let update = try await updates.iterator.next() else {
                releaseSet()
                return refusal(.serviceUnavailable, "shutting_down", "the daemon is shutting down")
            }
            first = update
        } catch let error as LiveQueryError {
            releaseSet()
            return refusal(error)
        } catch {
            releaseSet()
            return refusal(.internalServerError, "query_failed", "\(error)")
        }
        let stream = QueryStream(
            peer: viewer.peer, presentedToken: Self.isNetworkListener(context.channel) ? Self.presentedToken(request.head) : nil, name: name, tables: tables, runsAsSubscriber: runsAsSubscriber, rowSecurity: scope.rowSecurity, subscription: subscription
        )
        slot.track(stream)
        context.channel.closeFuture.whenComplete { _ in
            subscription.cancel()
            releaseSet()
        }
        if let expiresAt = viewer.expiresAt { Self.end(stream, whenTokenExpiresAt: expiresAt, on: context.channel) }
        let key = engine.definitions[name]?.key ?? []
        logger.debug("live query stream opened", metadata: ["query": "\(name)", "format": "\(format.rawValue)"])
        var headers = HTTPFields()
        headers[.contentType] = format.contentType
        headers[.cacheControl] = "no-cache"
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            let allocator = ByteBufferAllocator()
            if let frame = LiveQueryFrame.frame(first, key: key, format: format, allocator: allocator) { try await writer.write(frame) }
            do {
                while let delivery = try await updates.iterator.nextDelivery() {
                    switch delivery {
                    case .heartbeat:
                        try await writer.write(ByteBuffer(staticString: format.heartbeat))
                    case .update(let update):
                        guard let frame = LiveQueryFrame.frame(update, key: key, format: format, allocator: allocator) else { continue }
                        try await writer.write(frame)
                    }
                }
                if let ending = stream.endedBecause {
                    try await writer.write(ByteBuffer(string: ending.frame(in: format)))
                }
            } catch let error as LiveQueryError {
                try await writer.write(ByteBuffer(string: LiveQueryFrame.errorFrame(error, format: format)))
            }
            try await writer.finish(nil)
            withExtendedLifetime(slot) {}
        })
    }

    private func refusal(_ error: LiveQueryError) -> Response {
        let status: HTTPResponse.Status = switch error.code {
        case .unknownQuery: .notFound
        case .badParameters: .badRequest
        case .forbidden: .forbidden
        case .queryFailed: .internalServerError
        case .unavailable: .serviceUnavailable
        }
        return refusal(status, error.code.rawValue, error.message)
    }

    private func refusal(_ status: HTTPResponse.Status, _ code: String, _ message: String) -> Response {
        metrics?.recordRefusal(status: status.code)
        return Response.json(status, ErrorBody(code: code, message: message))
    }
}
