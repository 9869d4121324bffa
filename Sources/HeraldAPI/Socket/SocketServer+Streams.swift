import Foundation
import HTTPTypes
import Herald
import HeraldHTTP
import HeraldPostgres
import HeraldRealtime
import Hummingbird
import HummingbirdCore
import NIOCore
import NIOHTTPTypes

extension SocketServer {
    /// How the opening of a `GET /events` stream ended.
    enum StreamOpening: Sendable {
        /// Refused with a JSON error; nothing has been written.
        case refused(StreamRefusal)
        /// The head and any backlog are written; live events follow.
        case streaming(OpenedStream)
        /// The connection closed while the stream opened.
        case closed
    }

    /// A refused `GET /events`: its status and JSON body.
    struct StreamRefusal: Error {
        let status: HTTPResponse.Status
        let body: ErrorBody
    }

    /// A stream past its backlog, which ``EventStreamHandler`` feeds from its
    /// event loop. A class: the handler reads it for every batch, and a
    /// struct would retain each field each time.
    final class OpenedStream: Sendable {
        let subscription: Subscription
        let open: OpenStream
        /// Held for the stream's life: releasing it frees the subscriber slot.
        let slot: StreamSlot
        let format: StreamFormat
        let progress: StreamProgress
        /// The transactions the journal replay already covered; live events from them are repeats.
        let covering: TransactionSnapshot?
        /// With `group=transaction`: the grouper as the backlog left it,
        /// holding the start of a transaction whose end is still to come.
        let grouper: TransactionGrouper?
        /// Held for the stream's life with `group=transaction`, so that the listener marks transaction ends.
        let demand: TransactionEndsDemand?
        /// Where its events come from: the daemon's broker, or its row-security cohort's.
        let source: Broker

        init(
            subscription: Subscription, open: OpenStream, slot: StreamSlot, format: StreamFormat, progress: StreamProgress,
            covering: TransactionSnapshot?, grouper: TransactionGrouper?, demand: TransactionEndsDemand?, source: Broker
        ) {
            self.subscription = subscription
            self.open = open
            self.slot = slot
            self.format = format
            self.progress = progress
            self.covering = covering
            self.grouper = grouper
            self.demand = demand
            self.source = source
        }

        /// What the broker delivers to the stream: with `group=transaction`,
        /// every event, so that the grouper sees each transaction's end
        /// whichever table it is on; it passes on only what the grant allows.
        var subscribedFilter: EventFilter {
            grouper == nil ? open.granted : .all
        }
    }

    /// Opens a `GET /events` stream: validates the filter, subscribes,
    /// writes the response head and the backlog a resuming client missed.
    ///
    /// The subscription exists before the response head leaves, so an event
    /// committed after a client has the head is always delivered.
    func openStream(_ head: HTTPRequest, channel: any Channel) async -> StreamOpening {
        let parsed: StreamRequest
        switch StreamRequest.parse(head) {
        case .success(let success): parsed = success
        case .failure(let refusal): return .refused(refuse(.badRequest, refusal.body))
        }
        // Before the catalog is asked, so a refused peer cannot tell which tables exist.
        let viewer: Viewer
        switch await self.viewer(of: head, channel: channel) {
        case .success(let found): viewer = found
        case .failure(let refusal): return .refused(refuse(refusal.status, refusal.body))
        }
        let peer = viewer.peer
        var filter: EventFilter
        switch grant(parsed.requested, to: viewer) {
        case .success(let narrowed): filter = narrowed
        case .failure(let refusal): return .refused(refusal)
        }
        if let refusal = await validate(parsed.requested) { return .refused(refusal) }
        if parsed.groupsTransactions, let refusal = refuseGrouping(under: health.durability) { return .refused(refusal) }
        // Under `rls: true` the stream reads its cohort's broker, where every event is one its role and claims may see.
        var cohort: RowSecurityCohort?
        if let identity = viewer.scope.rowSecurity {
            guard let rowSecurity else {
                return .refused(refuse(.forbidden, ErrorBody(code: "forbidden", message: "row-level security is not available on this server")))
            }
            if parsed.groupsTransactions {
                return .refused(refuse(.badRequest, ErrorBody(
                    code: "bad_filter", message: "group=transaction is not served under row-level security (rls: true): a transaction may be partly visible"
                )))
            }
            do throws(RowSecurityError) {
                if let refusal = try await rowSecurity.columnRefusal(for: parsed.requested, as: identity) {
                    return .refused(refuse(.forbidden, ErrorBody(code: "permission_denied", message: refusal)))
                }
            } catch {
                return .refused(refuse(.serviceUnavailable, ErrorBody(code: "catalog_unavailable", message: error.reason)))
            }
            switch await privateTopicsReadable(by: identity, in: filter, gate: rowSecurity) {
            case .success(let readable?): filter = filter.privateTopics(readableByPolicy: readable)
            case .success(nil): break
            case .failure(let refusal): return .refused(refusal)
            }
            cohort = rowSecurity.cohort(for: identity)
        }
        let source = cohort?.broker ?? broker
        // A client whose stream shutdown just ended may come straight back: it is told to try later, not given a stream.
        if trackedStreams.withLock({ $0.isShuttingDown }) {
            return .refused(refuse(.serviceUnavailable, ErrorBody(code: "shutting_down", message: "the daemon is shutting down")))
        }
        let slot: StreamSlot
        // The client's own conditions; those of its access grant are the operator's.
        switch reserveStream(for: viewer, on: channel, conditions: parsed.requested.predicates.reduce(0) { $0 + $1.cost }) {
        case .success(let reserved): slot = reserved
        case .failure(let refusal):
            logger.warning("refused a stream: \(refusal.code == "too_many_subscribers" ? "subscriber limit reached" : "its holder's share is taken")", metadata: [
                "viewer": "\(viewer.name)", "reason": "\(refusal.message)",
            ])
            return .refused(refuse(refusal.status, ErrorBody(code: refusal.code, message: refusal.message)))
        }
        let progress = StreamProgress()
        // Before the subscription, so that the events it gets are marked.
        let demand = parsed.groupsTransactions ? broker.demandTransactionEnds() : nil
        var grouper = parsed.groupsTransactions ? TransactionGrouper(filter: filter) : nil
        let (subscription, history) = source.subscribe(
            grouper == nil ? filter : .all,
            resumingAfter: parsed.resumeFrom.map(String.init),
            capacity: configuration.mailboxCapacity,
            byteCapacity: configuration.mailboxBytes,
            kind: parsed.format.rawValue,
            wantsHeartbeats: true,
            onOverflow: Self.closeWhenStalled(channel, progress)
        )
        // Only the daemon's broker groups (never a cohort's), and its first count may be 0: nothing was published yet.
        if grouper != nil, parsed.resumeFrom == nil, subscription.startCount > 0, let newest = source.historyEvents(
            afterCount: subscription.startCount - 1, matching: .all, limit: 1
        )?.events.first, newest.count == subscription.startCount, !newest.endsTransaction {
            // Subscribed between two batches of one transaction: its rest alone would not be the whole.
            grouper?.begin(after: newest.transactionID)
        }
        // A client that vanishes stops its subscription at once, not at the next write that fails.
        channel.closeFuture.whenComplete { _ in subscription.cancel() }
        let open = OpenStream(
            peer: peer, requested: parsed.requested, granted: filter, subscription: subscription,
            presentedToken: Self.isNetworkListener(channel) ? Self.presentedToken(head) : nil
        )
        slot.track(open)
        if let expiresAt = viewer.expiresAt { Self.end(open, whenTokenExpiresAt: expiresAt, on: channel) }
        if let cohort {
            let watch = cohort.watch { reason in open.interrupt(reason) }
            channel.closeFuture.whenComplete { _ in cohort.unwatch(watch) }
        }
        logger.debug("stream opened", metadata: [
            "format": "\(parsed.format.rawValue)",
            "group": "\(parsed.groupsTransactions ? "transaction" : "none")",
            "filter": "\(FilterQuery.queryItems(for: parsed.requested))",
            "resume_from": "\(parsed.resumeFrom.map(String.init) ?? "none")",
            "viewer": "\(peer.map { "uid \($0.userID), pid \($0.processID)" } ?? viewer.name)",
        ])
        // Subscribed first, then the journal is read: whatever commits in between is in one or the other.
        let backlog: Backlog
        // A cohort's memory lacks what none of its streams followed when it happened: such a resume reads the journal.
        let memoryIsWhole = cohort.map { cohort in
            parsed.resumeFrom.map { !cohort.hasMissed(after: String($0), of: filter.tables) } ?? true
        } ?? true
        if let history, memoryIsWhole {
            backlog = .history(history)
        } else if let resumeFrom = parsed.resumeFrom {
            backlog = await journalBacklog(after: resumeFrom)
        } else {
            backlog = .history([])
        }
        do {
            let covering = try await writeStart(
                of: parsed.format, backlog: backlog, granted: filter, rowSecurity: cohort?.identity, grouper: &grouper, to: channel, progress: progress,
                headers: corsHeaders(for: head, channel: channel), replayHolder: slot.replayHolder
            )
            return .streaming(OpenedStream(
                subscription: subscription, open: open, slot: slot, format: parsed.format, progress: progress, covering: covering,
                grouper: grouper, demand: demand, source: source
            ))
        } catch {
            return .closed
        }
    }

    /// Ends `stream` when its token expires: its last frame says so, and the
    /// client reconnects with a fresh token.
    static func end(_ stream: some GrantedStream, whenTokenExpiresAt expiresAt: Double, on channel: any Channel) {
        guard let remaining = RealtimeIdentity.secondsUntilExpiry(expiresAt) else { return }
        let expiry = channel.eventLoop.scheduleTask(in: .milliseconds(Int64(max(0, remaining) * 1000))) {
            stream.finish(.tokenExpired("the token expired at \(Date(timeIntervalSince1970: expiresAt).formatted(.iso8601))"))
        }
        channel.closeFuture.whenComplete { _ in expiry.cancel() }
    }

    /// A stream that fell behind its mailbox reads on from the history; one
    /// whose client stopped reading is closed once its writes stall.
    private static func closeWhenStalled(_ channel: any Channel, _ progress: StreamProgress) -> @Sendable () -> Void {
        { progress.closeWhenStalled(channel) }
    }

    /// Subscribes `stream` again once it has caught up from the history to
    /// the change count `position`: the live subscription, and what was
    /// published after `position` meanwhile (nil when the history lost it).
    func resubscribe(_ stream: OpenedStream, afterCount position: UInt64, channel: any Channel) -> (Subscription, [Event]?) {
        let (subscription, replay) = stream.source.subscribe(
            stream.subscribedFilter,
            resumingAfterCount: position,
            capacity: configuration.mailboxCapacity,
            byteCapacity: configuration.mailboxBytes,
            kind: stream.format.rawValue,
            wantsHeartbeats: true,
            onOverflow: Self.closeWhenStalled(channel, stream.progress)
        )
        channel.closeFuture.whenComplete { _ in subscription.cancel() }
        return (subscription, replay)
    }

    /// What a `GET /events` asks for, read from its target and headers.
    struct StreamRequest {
        struct Refusal: Error {
            let body: ErrorBody
        }

        let format: StreamFormat
        let requested: EventFilter
        let resumeFrom: UInt64?
        /// `group=transaction`: one message per committed transaction.
        let groupsTransactions: Bool

        static let lastEventID = HTTPField.Name("Last-Event-ID")!

        static func parse(_ head: HTTPRequest) -> Result<StreamRequest, Refusal> {
            let items = URI(head.path ?? "/").queryParameters.map { (name: String($0.key), value: String($0.value)) }
            do throws(FilterError) {
                try SocketServer.refuseRepeats(of: ["format", "since", "group", "key", "access_token"], in: items)
                let format = try SocketServer.streamFormat(items: items, accept: head.headerFields[.accept])
                let requested = try FilterQuery.parse(items, ignoring: ["format", "since", "group", "key", "access_token"])
                let resumeFrom = try SocketServer.resumePosition(items: items, lastEventID: head.headerFields[lastEventID])
                let groupsTransactions = try SocketServer.groupsTransactions(items: items)
                return .success(StreamRequest(
                    format: format, requested: requested, resumeFrom: resumeFrom, groupsTransactions: groupsTransactions
                ))
            } catch {
                return .failure(Refusal(body: ErrorBody(error)))
            }
        }
    }

    /// Of the topics a broadcast filter names, those whose private messages
    /// the policies on `realtime.messages` let `identity` read, as a private
    /// channel's join asks them; nil where the database has no such
    /// policies, and the grants' `topics:` decide.
    private func privateTopicsReadable(
        by identity: RowSecurityIdentity, in filter: EventFilter, gate: RowSecurityGate
    ) async -> Result<Set<String>?, StreamRefusal> {
        guard filter.operations == .broadcast, let topics = filter.tables else { return .success(nil) }
        var readable: Set<String> = []
        for topic in topics.map(\.name).sorted() {
            do throws(RowSecurityError) {
                guard let authorization = try await gate.authorize(topic: topic, as: identity) else { return .success(nil) }
                if authorization.mayJoin { readable.insert(topic) }
            } catch {
                return .failure(refuse(.serviceUnavailable, ErrorBody(
                    code: "authorization_failed", message: "the private topic \(topic)'s authorization could not be checked: \(error.reason)"
                )))
            }
        }
        return .success(readable)
    }

    /// The refusal for a filter naming what the database does not have, or nil.
    private func validate(_ requested: EventFilter) async -> StreamRefusal? {
        do {
            guard let problem = try await catalog.validate(requested) else { return nil }
            return refuse(.badRequest, ErrorBody(problem))
        } catch {
            return refuse(.serviceUnavailable, ErrorBody(code: "catalog_unavailable", message: "cannot check the filter against the database: \(error)"))
        }
    }

    /// Why `group=transaction` cannot be served now, or nil: it needs the
    /// journal, and until the first connection it is not known whether there is one.
    private func refuseGrouping(under durability: Durability?) -> StreamRefusal? {
        switch durability {
        case .durable?:
            return nil
        case nil:
            return refuse(.serviceUnavailable, ErrorBody(
                code: "starting", message: "the daemon has not reached the database yet; try again shortly"
            ))
        case .notifyOnly?:
            return refuse(.badRequest, ErrorBody(
                code: "group_needs_journal",
                message: "group=transaction needs durable mode, where the journal says which event ends a transaction; "
                    + "this daemon runs notify-only (pgherald install --durability durable turns the journal on)"
            ))
        }
    }

    /// `requested` narrowed to what the viewer may see, or a 403.
    private func grant(_ requested: EventFilter, to viewer: Viewer) -> Result<EventFilter, StreamRefusal> {
        do {
            return .success(try requested.narrowed(to: viewer.scope))
        } catch {
            logger.notice("refused a stream outside the peer's grant", metadata: [
                "peer": "\(viewer.name)", "reason": "\(error.message)",
                "filter": "\(FilterQuery.queryItems(for: requested))",
            ])
            return .failure(refuse(.forbidden, ErrorBody(code: "forbidden", message: error.message)))
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

    /// `?group=transaction`, or no grouping.
    fileprivate static func groupsTransactions(items: [(name: String, value: String)]) throws(FilterError) -> Bool {
        guard let group = items.last(where: { $0.name == "group" })?.value else { return false }
        guard group == "transaction" else {
            throw FilterError(.malformed, parameter: "group", "group is transaction (one message per commit), or left out, not '\(group.prefix(40))'")
        }
        return true
    }

    /// `Last-Event-ID` (what SSE clients send on reconnect) or `?since=`.
    /// `Last-Event-ID` before `?since=`: an `EventSource` opened with `?since=` sends the URL again on
    /// every reconnect, with the header naming the event it got last, which is later.
    fileprivate static func resumePosition(items: [(name: String, value: String)], lastEventID: String?) throws(FilterError) -> UInt64? {
        let (parameter, given) = if let lastEventID {
            ("Last-Event-ID", lastEventID)
        } else if let since = items.last(where: { $0.name == "since" })?.value {
            ("since", since)
        } else {
            ("", "")
        }
        guard !parameter.isEmpty else { return nil }
        // Event ids are the journal's bigint: a larger number names no event. Digits only: `+5` is no id the daemon gave.
        let trimmed = given.trimmingCharacters(in: .whitespaces)
        guard trimmed.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }), let id = UInt64(trimmed), id <= UInt64(Int64.max) else {
            throw FilterError(.malformed, parameter: parameter, "\(parameter) must be an event id, not '\(given.prefix(40))'")
        }
        return id
    }

    private func journalBacklog(after eventID: UInt64) async -> Backlog {
        guard health.durability == .durable else {
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

    /// Writes the response head and the backlog, each write waited for so
    /// that a slow reader holds the replay back; returns the transactions a
    /// journal replay covered. With a `grouper`, the backlog goes out as
    /// whole transactions.
    /// - Parameters:
    ///   - rowSecurity: the identity whose policies decide what of the journal the stream may see.
    ///   - headers: added to the response head (CORS).
    ///   - replayHolder: whose turn on the journal's connection a replay takes.
    private func writeStart(
        of format: StreamFormat, backlog: Backlog, granted: EventFilter, rowSecurity identity: RowSecurityIdentity?,
        grouper: inout TransactionGrouper?, to channel: any Channel, progress: StreamProgress, headers: HTTPFields, replayHolder: String
    ) async throws -> TransactionSnapshot? {
        var head = HTTPResponse(status: .ok, headerFields: headers)
        head.headerFields[.contentType] = format.contentType
        head.headerFields[.cacheControl] = "no-cache"
        // A stream is the connection's last response; clients must not reuse it,
        // so the stall check after an overflow can never hit a new stream.
        head.headerFields[.connection] = "close"
        func send(_ bytes: ByteBuffer) async throws {
            try await channel.writeAndFlush(HTTPResponsePart.body(bytes)).get()
            progress.recordWrite()
        }
        func frames(_ events: some Collection<Event>) -> ByteBuffer? {
            if grouper != nil {
                let groups = grouper!.add(events)
                return groups.isEmpty ? nil : format.frames(groups, allocator: channel.allocator)
            }
            return events.isEmpty ? nil : format.frames(Array(events), allocator: channel.allocator)
        }
        func send(_ events: some Collection<Event>) async throws {
            if let bytes = frames(events) { try await send(bytes) }
        }
        // The head leaves at once; SSE clients are told how soon to reconnect.
        if format == .sse {
            channel.write(HTTPResponsePart.head(head), promise: nil)
            try await send(ByteBuffer(string: "retry: 1000\n\n"))
        } else {
            try await channel.writeAndFlush(HTTPResponsePart.head(head)).get()
        }
        switch backlog {
        case .history(let events):
            for start in stride(from: 0, to: events.count, by: 512) {
                try await send(events[start..<min(start + 512, events.count)])
            }
            // Delivered before this stream asked for ends to be marked, the newest transaction may lack its mark.
            if let last = events.last, !last.endsTransaction, grouper?.isInsideTransaction == true,
                (try? await journal.endsTransaction(last)) == true, let group = grouper?.flush() {
                try await send(format.frames([group], allocator: channel.allocator))
            }
            return nil
        case .journal(var cursor):
            // Live events wait in the subscription's buffer meanwhile; a long
            // replay may overflow it, and the client resumes from where it got to.
            // Under row-level security the filter's conditions are judged on what the identity sees, as live:
            // on the row as written they would tell hidden columns and rows out of view bit by bit.
            let read = identity == nil ? granted : EventFilter(tables: granted.tables, schemas: granted.schemas, operations: granted.operations)
            // Read and not yet judged: a page is judged in parts of bounded bytes, each in a turn, so that
            // a page of large rows does not hold one turn for seconds.
            var unjudged: ArraySlice<Event> = []
            // Counted among its holder's replays, whose pages share a byte budget: a hundred slow replays
            // of one user's, each holding a page of large rows, would otherwise hold a hundred pages.
            let replay = journal.beginReplay(of: replayHolder)
            defer { journal.endReplay(replay) }
            channel.closeFuture.whenComplete { [journal] _ in journal.abandon(replay) }
            while !cursor.isFinished || !unjudged.isEmpty {
                // A page that the filter empties writes nothing, so a write cannot tell that the client left:
                // without this, a replay went on reading the journal for a client long gone, ahead of everyone else's.
                guard channel.isActive else { throw ChannelError.ioOnClosedChannel }
                if unjudged.isEmpty { try await journal.waitForRoom(replay) }
                // The page's work (read, judged, framed) in its holder's turn; the write after it, so that a
                // slow client holds no turn.
                let bytes: ByteBuffer?
                do {
                    bytes = try await journal.inTurn(of: replayHolder, after: cursor, judged: identity != nil) {
                        if unjudged.isEmpty { unjudged = try await journal.nextPage(&cursor, of: replay, matching: read)[...] }
                        guard let identity, let rowSecurity else {
                            defer { unjudged = [] }
                            return frames(Array(unjudged))
                        }
                        let part = Array(unjudged.prefix(rowSecurity.firstPart(of: unjudged)))
                        unjudged = unjudged.dropFirst(part.count)
                        return frames(try await rowSecurity.visible(part, to: identity).filter(granted.matches))
                    }
                } catch let error as RowSecurityError {
                    try await send(ByteBuffer(string: format.revokedFrame(reason: "pgherald: the row-level security check failed: \(error.reason)")))
                    throw error
                }
                if let bytes { try await send(bytes) }
            }
            // A replay ends with whole transactions: each it read had committed.
            if let last = grouper?.flush() { try await send(format.frames([last], allocator: channel.allocator)) }
            return cursor.covering
        case .reset(let reason):
            try await send(ByteBuffer(string: format.resetFrame(reason: reason)))
            return nil
        }
    }

    /// Refuses a parameter that takes one value and is given twice: which
    /// of the two a proxy, a log or the daemon reads must never differ.
    static func refuseRepeats(of names: [String], in items: [(name: String, value: String)]) throws(FilterError) {
        for name in names where items.lazy.filter({ $0.name == name }).count > 1 {
            throw FilterError(.malformed, parameter: name, "\(name) is given twice; give it once")
        }
    }

    static func streamFormat(items: [(name: String, value: String)], accept: String?) throws(FilterError) -> StreamFormat {
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
    private func refuse(_ status: HTTPResponse.Status, _ body: ErrorBody) -> StreamRefusal {
        metrics?.recordRefusal(status: status.code)
        return StreamRefusal(status: status, body: body)
    }

    /// The least wait between a stream's writes that
    /// ``SocketConfiguration/writeRate`` sets for the streams open now; nil without a rate.
    func writeCeiling() -> TimeAmount? {
        guard configuration.writeRate != nil else { return nil }
        return configuration.writeSpacing(openStreams: streams.withLock { $0.total }).map { .nanoseconds(Int64($0 / .nanoseconds(1))) }
    }
}
