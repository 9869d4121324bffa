import Foundation
import Herald
import HeraldPostgres
import HeraldWebhooks
import Hummingbird
import NIOCore
import ServiceLifecycle

extension SocketServer {
    func addRoutes(to router: Router<SocketRequestContext>) {
        router.get("events") { request, context in
            try await self.events(request, context: context)
        }
        router.get("stats") { _, context in
            let scope = await self.scope(of: context.channel)
            return self.jsonResponse(.ok, self.statistics(journal: await self.maintenance?.statistics(maximumAge: .seconds(2)), visibleTo: scope))
        }
        router.get("healthz") { _, _ in
            let listener = self.listenerState()
            return self.jsonResponse(listener.state == "listening" ? .ok : .serviceUnavailable, listener)
        }
        if let metrics {
            router.get("metrics") { _, context in
                let scope = await self.scope(of: context.channel)
                return metrics.response(journal: await self.maintenance?.statistics(maximumAge: .seconds(2)), visibleTo: scope)
            }
        }
    }

    /// - Parameter scope: per-table figures are given only for the tables it covers.
    func statistics(journal: DaemonStatistics.Journal?, visibleTo scope: AccessScope = .everything) -> DaemonStatistics {
        let broker = self.broker.statistics
        return DaemonStatistics(
            version: version,
            changeCount: broker.changeCount,
            tables: Dictionary(uniqueKeysWithValues: broker.tableCounts.filter { scope.covers($0.key) }.map { ($0.key.description, $0.value) }),
            subscribers: broker.subscribersByKind,
            overflows: broker.overflowCount,
            uptimeSeconds: (ContinuousClock.now - started) / .seconds(1),
            listener: listenerState(),
            durability: listener.durability?.rawValue,
            journal: journal,
            webhooks: webhooks.flatMap { $0.endpoints.isEmpty ? nil : $0.statistics }
        )
    }

    func listenerState() -> DaemonStatistics.Listener {
        switch listener.status {
        case .notStarted, .connecting: return .init(state: "connecting", reason: "connecting to PostgreSQL")
        case .catchingUp: return .init(state: "catching-up", reason: "replaying events committed while not listening")
        case .listening: return .init(state: "listening")
        case .reconnecting(let attempt, let lastError):
            return .init(state: "reconnecting", reason: "attempt \(attempt): \(lastError)")
        case .stopped: return .init(state: "stopped", reason: "the listener has stopped")
        }
    }

    /// `GET /events`: validates the filter, subscribes, then streams.
    ///
    /// The subscription exists before the response headers leave, so an
    /// event committed after a client has the headers is always delivered.
    ///
    /// Each step is its own function and this one keeps few values across
    /// its waits: the task allocator keeps the deepest stack a stream's task
    /// ever reached for the stream's whole life.
    func events(_ request: Request, context: SocketRequestContext) async throws -> Response {
        let parsed: StreamRequest
        switch StreamRequest.parse(request) {
        case .success(let success): parsed = success
        case .failure(let refusal): return refuse(.badRequest, refusal.body)
        }
        // Before the catalog is asked, so a refused peer cannot tell which tables exist.
        // Asked only under access rules: the wait would cost every stream a larger task stack for its whole life.
        let policy = access.withLock { $0 }
        let peer = policy == nil ? nil : await PeerCredentials.of(context.channel)
        let filter: EventFilter
        switch grant(parsed.requested, to: peer, under: policy) {
        case .granted(let narrowed): filter = narrowed
        case .refused(let response): return response
        }
        if let refusal = await validate(parsed.requested) { return refusal }
        guard let slot = reserveStream() else {
            logger.warning("refused a stream: subscriber limit reached", metadata: ["limit": "\(configuration.maximumSubscribers)"])
            return refuse(.serviceUnavailable, ErrorBody(code: "too_many_subscribers", message: "the daemon serves at most \(configuration.maximumSubscribers) streams"))
        }
        return await openStream(parsed, filter: filter, peer: peer, slot: slot, channel: context.channel)
    }

    /// What a `GET /events` asks for, read from its query and headers.
    struct StreamRequest {
        struct Refusal: Error {
            let body: ErrorBody
        }

        let format: StreamFormat
        let requested: EventFilter
        let resumeFrom: UInt64?

        static func parse(_ request: Request) -> Result<StreamRequest, Refusal> {
            let items = request.uri.queryParameters.map { (name: String($0.key), value: String($0.value)) }
            do throws(FilterError) {
                let format = try SocketServer.streamFormat(items: items, accept: request.headers[.accept])
                let requested = try FilterQuery.parse(items, ignoring: ["format", "since"])
                let lastEventID = request.headers.first { $0.name.canonicalName == "last-event-id" }?.value
                let resumeFrom = try SocketServer.resumePosition(items: items, lastEventID: lastEventID)
                return .success(StreamRequest(format: format, requested: requested, resumeFrom: resumeFrom))
            } catch {
                return .failure(Refusal(body: ErrorBody(error)))
            }
        }
    }

    /// The refusal for a filter naming what the database does not have, or nil.
    private func validate(_ requested: EventFilter) async -> Response? {
        do {
            guard let problem = try await catalog.validate(requested) else { return nil }
            return refuse(.badRequest, ErrorBody(problem))
        } catch {
            return refuse(.serviceUnavailable, ErrorBody(code: "catalog_unavailable", message: "cannot check the filter against the database: \(error)"))
        }
    }

    /// Subscribes, reads the backlog a resuming client missed, and returns the streaming response.
    private func openStream(
        _ parsed: StreamRequest, filter: EventFilter, peer: PeerCredentials?, slot: StreamSlot, channel: any Channel
    ) async -> Response {
        let (format, requested, resumeFrom) = (parsed.format, parsed.requested, parsed.resumeFrom)
        let progress = StreamProgress()
        let (subscription, history) = broker.subscribe(
            filter,
            resumingAfter: resumeFrom.map(String.init),
            capacity: configuration.subscriberBuffer,
            kind: format.rawValue,
            wantsHeartbeats: true,
            onOverflow: {
                // A client that stopped reading never gets to the overflow frame; close it.
                progress.closeWhenStalled(channel)
            }
        )
        // Subscribed first, then the journal is read: whatever commits in between is in one or the other.
        let backlog: Backlog
        if let history {
            backlog = .history(history)
        } else if let resumeFrom {
            backlog = await journalBacklog(after: resumeFrom)
        } else {
            backlog = .history([])
        }
        // A client that vanishes stops its subscription at once, not at the next write that fails.
        channel.closeFuture.whenComplete { _ in subscription.cancel() }
        let open = OpenStream(peer: peer, requested: requested, granted: filter, subscription: subscription)
        slot.track(open)
        logger.debug("stream opened", metadata: [
            "format": "\(format.rawValue)",
            "filter": "\(FilterQuery.queryItems(for: requested))",
            "resume_from": "\(resumeFrom.map(String.init) ?? "none")",
            "peer": "\(peer.map { "uid \($0.userID), pid \($0.processID)" } ?? "unknown")",
        ])
        var headers = HTTPFields()
        headers[.contentType] = format.contentType
        headers[.cacheControl] = "no-cache"
        // A stream is the connection's last response; clients must not reuse it,
        // so the stall check after an overflow can never hit a new stream.
        headers[.connection] = "close"
        return Response(status: .ok, headers: headers, body: ResponseBody { [logger] writer in
            try await withGracefulShutdownHandler {
                try await withTaskExecutorPreference(EventLoopTaskExecutor(eventLoop: channel.eventLoop)) {
                    try await self.stream(subscription, open: open, after: backlog, as: format, to: &writer, channel: channel, progress: progress)
                }
            } onGracefulShutdown: {
                subscription.cancel()
            }
            withExtendedLifetime(slot) {}
            logger.debug("stream closed", metadata: ["format": "\(format.rawValue)"])
        })
    }

    /// A stream's filter under the peer's grant, or the refusal.
    enum Grant {
        case granted(EventFilter)
        case refused(Response)
    }

    /// `requested` narrowed to what `peer` may see, or a 403. Not async, so
    /// that its locals stay out of the stream task's frame.
    private func grant(_ requested: EventFilter, to peer: PeerCredentials?, under policy: AccessPolicy?) -> Grant {
        let (scope, identity) = scope(of: peer, under: policy)
        do {
            return .granted(try requested.narrowed(to: scope))
        } catch {
            logger.notice("refused a stream outside the peer's grant", metadata: [
                "peer": "\(identity.map(String.init(describing:)) ?? "unknown")", "reason": "\(error.message)",
                "filter": "\(FilterQuery.queryItems(for: requested))",
            ])
            return .refused(refuse(.forbidden, ErrorBody(code: "forbidden", message: error.message)))
        }
    }

    /// What a resuming client gets before the live events.
    enum Backlog: Sendable {
        /// Missed events, from the broker's history.
        case history([Event])
        /// Missed events, to be read from the journal.
        case journal(JournalReader.ReplayCursor)
        /// The position is unknown: the client must refetch everything.
        case reset(reason: String)
    }

    /// `Last-Event-ID` (what SSE clients send on reconnect) or `?since=`.
    fileprivate static func resumePosition(items: [(name: String, value: String)], lastEventID: String?) throws(FilterError) -> UInt64? {
        let (parameter, given) = if let since = items.last(where: { $0.name == "since" })?.value {
            ("since", since)
        } else if let lastEventID {
            ("Last-Event-ID", lastEventID)
        } else {
            ("", "")
        }
        guard !parameter.isEmpty else { return nil }
        guard let id = UInt64(given.trimmingCharacters(in: .whitespaces)) else {
            throw FilterError(.malformed, parameter: parameter, "\(parameter) must be an event id, not '\(given.prefix(40))'")
        }
        return id
    }

    private func journalBacklog(after eventID: UInt64) async -> Backlog {
        guard listener.durability == .durable else {
            return .reset(reason: "event \(eventID) is older than the daemon's memory, and there is no journal (notify-only mode)")
        }
        do {
            switch try await journal.replay(after: eventID) {
            case .journal(let cursor):
                return .journal(cursor)
            case .reset(let reason):
                return .reset(reason: reason)
            }
        } catch {
            logger.warning("cannot read the journal for a resuming client", metadata: ["error": "\(error)"])
            return .reset(reason: "the journal cannot be read: \(error)")
        }
    }

    private func stream(
        _ subscription: Subscription,
        open: OpenStream,
        after backlog: Backlog,
        as format: StreamFormat,
        to writer: inout any ResponseBodyWriter,
        channel: any Channel,
        progress: StreamProgress
    ) async throws {
        if format == .sse {
            // Sends the headers at once and tells clients how soon to reconnect.
            try await writer.write(ByteBuffer(string: "retry: 1000\n\n"))
        }
        var covering: TransactionSnapshot?
        switch backlog {
        case .history(let events):
            for start in stride(from: 0, to: events.count, by: 512) {
                try await writer.write(format.frames(events[start..<min(start + 512, events.count)], allocator: channel.allocator))
                progress.recordWrite()
            }
        case .journal(var cursor):
            // Live events wait in the subscription's buffer meanwhile; a long
            // replay may overflow it, and the client resumes from where it got to.
            covering = cursor.covering
            while !cursor.isFinished {
                let page = try await journal.nextPage(&cursor, matching: open.granted)
                guard !page.isEmpty else { continue }
                try await writer.write(format.frames(page, allocator: channel.allocator))
                progress.recordWrite()
            }
        case .reset(let reason):
            try await writer.write(ByteBuffer(string: format.resetFrame(reason: reason)))
        }
        var lastWrite: NIODeadline?
        let direct = DirectChunkWriter(channel: channel)
        let ticker = writeTicker(for: channel.eventLoop)
        while true {
            if let lastWrite { await waitForNextWrite(after: lastWrite, on: ticker) }
            let delivery: Subscription.Delivery
            do {
                delivery = try await subscription.nextDelivery(limit: 512)
            } catch {
                try await writer.write(ByteBuffer(string: format.overflowFrame(capacity: error.capacity)))
                try await writer.finish(nil)
                return
            }
            switch delivery {
            case .events(var events):
                if let snapshot = covering {
                    events.removeAll { event in UInt64(event.transactionID).map(snapshot.isVisible) ?? false }
                    // Live events come in commit order: after one committed later
                    // than the journal read, no repeat of the replay can follow.
                    if !events.isEmpty { covering = nil }
                }
                if events.isEmpty { continue }
                if let direct, direct.canWrite {
                    direct.write(format.frames(events, allocator: channel.allocator, asHTTPChunk: true))
                } else {
                    try await writer.write(format.frames(events, allocator: channel.allocator))
                }
                progress.recordWrite()
                lastWrite = .now()
            case .heartbeat:
                try await writer.write(ByteBuffer(staticString: format.heartbeat))
                progress.recordWrite()
            case .finished:
                if let reason = open.revokedBecause {
                    try await writer.write(ByteBuffer(string: format.revokedFrame(reason: reason)))
                }
                try await writer.finish(nil)
                return
            }
        }
    }

    fileprivate static func streamFormat(items: [(name: String, value: String)], accept: String?) throws(FilterError) -> StreamFormat {
        if let requested = items.last(where: { $0.name == "format" })?.value {
            guard let format = StreamFormat(rawValue: requested) else {
                throw FilterError(.malformed, parameter: "format", "format is sse or ndjson, not '\(requested.prefix(40))'")
            }
            return format
        }
        if let accept, accept.contains("application/x-ndjson") { return .ndjson }
        return .sse
    }

    /// A refused `GET /events`, counted for `/metrics`.
    private func refuse(_ status: HTTPResponse.Status, _ body: ErrorBody) -> Response {
        metrics?.recordRefusal(status: status.code)
        return jsonResponse(status, body)
    }

    func jsonResponse(_ status: HTTPResponse.Status, _ body: some Encodable) -> Response {
        Response.json(status, body)
    }
}

extension Response {
    /// `body` as JSON with sorted keys and a final newline.
    static func json(_ status: HTTPResponse.Status, _ body: some Encodable) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: jsonBuffer(body)))
    }

    static func jsonBuffer(_ body: some Encodable) -> ByteBuffer {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = (try? encoder.encode(body)) ?? Data("{}".utf8)
        return ByteBuffer(bytes: data + [UInt8(ascii: "\n")])
    }
}

/// The JSON body of a refused request.
struct ErrorBody: Encodable {
    var error: String
    var parameter: String?
    var message: String

    init(_ filterError: FilterError) {
        error = filterError.code.rawValue
        parameter = filterError.parameter
        message = filterError.message
    }

    init(code: String, message: String) {
        error = code
        self.message = message
    }
}
