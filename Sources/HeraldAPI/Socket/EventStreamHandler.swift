import HTTPTypes
import Herald
import HeraldHTTP
import HeraldSupport
import HummingbirdCore
import NIOCore
import NIOHTTPTypes

/// Serves `GET /events` on the socket's connections, in front of Hummingbird.
///
/// A connection whose first request is a stream gets a pipeline that ends
/// here (see ``SocketChildChannel``). On a connection Hummingbird serves,
/// other requests pass through, and a `GET /events` that comes later (a
/// client reusing its connection) is taken over once the responses before
/// it are written: Hummingbird's idle timeout is then taken out of the
/// pipeline, and its connection task waits for a next request that never comes.
///
/// The stream's opening (the filter's checks, the subscription, the
/// backlog) runs in a short task; the live events are then written from the
/// channel's event loop, woken by the subscription, the write ticker or
/// the channel's writability. An idle stream so holds no task and no
/// parked async stack, only this handler and its subscription.
final class EventStreamHandler: ChannelDuplexHandler, RemovableChannelHandler, WakeableStream {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The most batches written in one turn of the event loop before the other channels get theirs.
    private static let batchesPerTurn = 16
    /// The longest a stream's turn on its event loop may run: a stream whose conditions are costly
    /// (a `like` over long rows) must let the other streams on its loop have theirs.
    private static let turnBudget = TimeAmount.milliseconds(2)
    /// The most bytes of events one write frames, past the first event: the channel is checked for
    /// room between writes, so what a client that does not read holds is about one such write.
    private static let batchBytes = 1 << 20

    private let server: SocketServer
    private let headTimeout: TimeAmount?
    private var headDeadline: Scheduled<Void>?
    private var context: ChannelHandlerContext?
    /// Requests passed on to Hummingbird whose responses have not ended.
    private var responsesPending = 0
    /// A stream request waiting for the responses before it.
    private var heldHead: HTTPRequest?
    private var takenOver = false
    private var stream: SocketServer.OpenedStream?
    /// The live events; nil while the stream catches up from the broker's history.
    private var subscription: Subscription?
    /// The change count of the last event the client was sent (or skipped by
    /// its filter): where a stream that fell behind its mailbox reads on from
    /// the history. Nil while a journal replay's events may still come live.
    private var position: UInt64?
    private var direct: DirectChunkWriter?
    private var ticker: WriteTicker?
    private var covering: TransactionSnapshot?
    /// With `group=transaction`: the transaction being gathered.
    private var grouper: TransactionGrouper?
    /// The subscription will call back when it has something.
    private var waitingForEvents = false
    /// The write ticker will call back when the write spacing has passed.
    private var waitingForTick = false
    /// Costly checks of events' columns run on ``ColumnCheckLane``, which calls back with what passed.
    private var checkingOnLane = false
    /// The end is written: nothing more goes out.
    private var ended = false
    /// ``pump()`` is running: a write can call back into it (a flush that
    /// makes the channel writable again), and the running loop covers that.
    private var pumping = false
    /// When the running ``pump()`` began: the time its writes are stamped with.
    private var pumpStarted = NIODeadline.uptimeNanoseconds(0)
    /// When live events were last written: the write spacing counts from here.
    private var lastLiveWrite: NIODeadline?
    /// What the subscription calls once it has something: made once per
    /// stream, not per wait. It holds the handler, so it goes when the channel does.
    private var wake: (@Sendable () -> Void)?

    /// - Parameter headTimeout: for a connection of its own, how long its
    ///   request head may take; nil in front of Hummingbird, whose idle timeout applies.
    init(server: SocketServer, headTimeout: TimeAmount?) {
        self.server = server
        self.headTimeout = headTimeout
    }

    /// Whether `head` asks for an event stream.
    static func isStreamRequest(_ head: HTTPRequest) -> Bool {
        head.method == .get && URI(head.path ?? "").path == "/events"
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        guard let headTimeout else { return }
        let channel = context.channel
        // A client that trickles its headers is closed, as Hummingbird's idle timeout would.
        headDeadline = context.eventLoop.scheduleTask(in: headTimeout) { channel.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        headDeadline?.cancel()
        wake = nil
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // What follows a stream's head (a body, further requests) is not read: the stream is the connection's last response.
        guard !takenOver, heldHead == nil else { return }
        guard case .head(let head) = unwrapInboundIn(data) else { return context.fireChannelRead(data) }
        guard Self.isStreamRequest(head) else {
            responsesPending += 1
            return context.fireChannelRead(data)
        }
        if responsesPending == 0 {
            takeOver(head, context: context)
        } else {
            heldHead = head
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else { return context.write(data, promise: promise) }
        // Hummingbird's 400 for a request it could not parse ends a response whose head never passed here.
        responsesPending = max(0, responsesPending - 1)
        context.write(data, promise: promise)
        if responsesPending == 0, let heldHead {
            self.heldHead = nil
            takeOver(heldHead, context: context)
        }
    }

    /// Opens the stream `head` asks for; from here on the connection is the stream's.
    private func takeOver(_ head: HTTPRequest, context: ChannelHandlerContext) {
        takenOver = true
        headDeadline?.cancel()
        let sync = context.pipeline.syncOperations
        if let idleTimeout = try? sync.handler(type: HTTPConnectionStateHandler.self) {
            sync.removeHandler(idleTimeout, promise: nil)
        }
        let channel = context.channel
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        Task(executorPreference: EventLoopTaskExecutor(eventLoop: context.eventLoop)) { [server] in
            let opening = await server.openStream(head, channel: channel)
            // A refusal carries the CORS headers too, so that a page can read why.
            let headers = server.corsHeaders(for: head, channel: channel)
            channel.eventLoop.execute { handler.value.opened(opening, headers: headers) }
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { pump() }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        ended = true
        wake = nil
        if let stream {
            subscription?.cancel()
            subscription = nil
            server.logger.debug("stream closed", metadata: ["format": "\(stream.format.rawValue)"])
            // Frees the subscriber slot.
            self.stream = nil
        }
        context.fireChannelInactive()
    }

    private func opened(_ opening: SocketServer.StreamOpening, headers: HTTPFields) {
        guard let context, !ended else { return }
        switch opening {
        case .refused(let refusal):
            ended = true
            SocketLimitsHandler.answer(context, status: refusal.status, refusal.body, headers: headers)
        case .closed:
            ended = true
            context.close(promise: nil)
        case .streaming(let opened):
            stream = opened
            subscription = opened.subscription
            covering = opened.covering
            grouper = opened.grouper
            if covering == nil { position = opened.subscription.startCount }
            direct = DirectChunkWriter(channel: context.channel)
            let ticker = server.writeTicker(for: context.eventLoop)
            self.ticker = ticker
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            wake = { ticker.ready.wake(handler) }
            pump()
        }
    }

    /// Writes what the subscription has, until it has nothing, the channel
    /// cannot take more, or the write spacing says to wait.
    private func pump() {
        guard let context, let stream, !ended, !pumping, !waitingForEvents, !waitingForTick, !checkingOnLane else { return }
        pumping = true
        pumpStarted = .now()
        defer {
            pumping = false
            ticker?.recordWork(from: pumpStarted, to: .now())
        }
        let format = stream.format
        let channel = context.channel
        // Read once a turn: with a write rate, it takes the open-streams lock.
        let ceiling = server.writeCeiling()
        for _ in 0..<Self.batchesPerTurn {
            if NIODeadline.now() - pumpStarted > Self.turnBudget { break }
            // Unwritable: events wait in the mailbox until the client reads, or it overflows.
            guard channel.isActive, channel.isWritable else { return }
            guard let subscription else {
                if catchUp(context, stream) { continue } else { return }
            }
            // While writes are spaced, what came since the last write waits for the stream's tick.
            if let ticker, let lastLiveWrite, let (due, grid) = ticker.nextWrite(after: lastLiveWrite, ceiling: ceiling),
                due > pumpStarted {
                waitingForTick = true
                ticker.schedule(at: due, grid: grid) { [self] in
                    waitingForTick = false
                    pump()
                }
                return
            }
            let delivery: Subscription.Delivery?
            do {
                if subscription.checksAreCostly {
                    delivery = try subscription.pollUnchecked(limit: 512, bytes: Self.batchBytes)
                    if case .events(let events)? = delivery { return checkOnLane(events, of: subscription, context) }
                } else {
                    delivery = try subscription.pollDelivery(limit: 512, bytes: Self.batchBytes)
                }
            } catch {
                // Fallen behind its mailbox: a reader that keeps reading reads on from the history.
                guard let position else { return end(context, lastFrame: format.overflowFrame(capacity: error.capacity)) }
                self.subscription = nil
                guard stream.open.replaceSubscription(with: nil) else { return endAsRevokedOrFinished(context, stream) }
                server.logger.debug("a stream fell behind its buffer; it reads on from the history", metadata: [
                    "capacity": "\(error.capacity)", "after_count": "\(position)",
                ])
                continue
            }
            switch delivery {
            case nil:
                return waitForEvents(from: subscription)
            case .events(let events)?:
                if writeLive(events, context, stream, ceiling: ceiling) { return waitForEvents(from: subscription) }
            case .heartbeat?:
                context.writeAndFlush(wrapOutboundOut(.body(ByteBuffer(staticString: format.heartbeat))), promise: nil)
                stream.progress.recordWrite(at: pumpStarted)
            case .finished?:
                return endAsRevokedOrFinished(context, stream)
            }
        }
        // Busy: the other channels on this loop get their turn first.
        context.eventLoop.assumeIsolated().execute { [self] in pump() }
    }

    /// Writes live events that passed the filter.
    /// - Returns: whether the stream now waits for events: its writes are spaced.
    private func writeLive(_ events: [Event], _ context: ChannelHandlerContext, _ stream: SocketServer.OpenedStream, ceiling: TimeAmount?) -> Bool {
        var events = events
        if let snapshot = covering {
            events.removeAll { event in UInt64(event.transactionID).map(snapshot.isVisible) ?? false }
            // Live events come in commit order: after one committed later
            // than the journal read, no repeat of the replay can follow.
            if !events.isEmpty { covering = nil }
        }
        guard !events.isEmpty else { return false }
        deliver(events, context, stream)
        lastLiveWrite = pumpStarted
        // Spaced: the stream sleeps until an event comes, and only then waits out the rest of the spacing.
        guard let ticker else { return false }
        return ticker.nextWrite(after: pumpStarted, ceiling: ceiling) != nil
    }

    /// Has ``ColumnCheckLane`` check `events`, whose checks proved costly, and goes on with what
    /// passed back on the loop: the other streams of the loop do not wait for them.
    private func checkOnLane(_ events: [Event], of subscription: Subscription, _ context: ChannelHandlerContext) {
        checkingOnLane = true
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loop = context.eventLoop
        ColumnCheckLane.shared.submit {
            let passed = subscription.passingColumns(events)
            loop.execute { handler.value.checked(passed, by: subscription) }
        }
    }

    /// The lane's answer for the events taken from `subscription`.
    private func checked(_ passed: [Event], by subscription: Subscription) {
        checkingOnLane = false
        guard let context, let stream, !ended, subscription === self.subscription else { return }
        pumpStarted = .now()
        if writeLive(passed, context, stream, ceiling: server.writeCeiling()) { return waitForEvents(from: subscription) }
        pump()
    }

    /// Pumps again once `subscription` has something (see ``woken()``).
    private func waitForEvents(from subscription: Subscription) {
        guard let wake else { return }
        waitingForEvents = true
        subscription.whenReady(wake)
    }

    /// The subscription has something: called on the loop by ``ReadyStreams``.
    func woken() {
        waitingForEvents = false
        pump()
    }

    /// Writes `events`, or with `group=transaction` the transactions they complete.
    private func deliver(_ events: [Event], _ context: ChannelHandlerContext, _ stream: SocketServer.OpenedStream) {
        let allocator = context.channel.allocator
        let asHTTPChunk = direct != nil
        if grouper != nil {
            let groups = grouper!.add(events)
            if !groups.isEmpty {
                write(stream.format.frames(groups, allocator: allocator, asHTTPChunk: asHTTPChunk), context, stream)
                server.eventsWritten.add(UInt64(groups.reduce(0) { $0 + $1.count }), ordering: .relaxed)
            }
        } else {
            write(stream.format.frames(events, allocator: allocator, asHTTPChunk: asHTTPChunk), context, stream)
            server.eventsWritten.add(UInt64(events.count), ordering: .relaxed)
        }
        // Past a journal replay's coverage, live events say where the stream stands.
        if covering == nil, let last = events.last?.count, last > 0 { position = last }
    }

    /// Writes framed events: as one HTTP chunk of its own when ``direct`` is set.
    private func write(_ frames: ByteBuffer, _ context: ChannelHandlerContext, _ stream: SocketServer.OpenedStream) {
        if let direct {
            direct.write(frames)
        } else {
            context.writeAndFlush(wrapOutboundOut(.body(frames)), promise: nil)
        }
        stream.progress.recordWrite(at: pumpStarted)
    }

    /// One step of a stream that fell behind its mailbox: the next events
    /// after ``position`` from the broker's history, as fast as the client
    /// takes them, then, once at the newest, the live subscription again. A
    /// stalled client so holds a position, not a copy of what it missed.
    /// `event: overflow` only when the history no longer reaches back to it.
    /// - Returns: whether to go on pumping.
    private func catchUp(_ context: ChannelHandlerContext, _ stream: SocketServer.OpenedStream) -> Bool {
        guard !stream.open.isEnded, let position else {
            endAsRevokedOrFinished(context, stream)
            return false
        }
        guard let read = stream.source.historyEvents(afterCount: position, matching: stream.subscribedFilter, limit: 512, bytes: Self.batchBytes) else {
            endBehindTheHistory(context, stream)
            return false
        }
        if !read.events.isEmpty { deliver(read.events, context, stream) }
        // Past the events the filter passed over too.
        self.position = read.position
        guard read.isNewest else { return true }
        let (live, replay) = server.resubscribe(stream, afterCount: read.position, channel: context.channel)
        guard let replay else {
            live.cancel()
            endBehindTheHistory(context, stream)
            return false
        }
        guard stream.open.replaceSubscription(with: live) else {
            endAsRevokedOrFinished(context, stream)
            return false
        }
        // The overflowed subscription kept its tables followed (for a cohort's checks) while the stream read the history.
        subscription?.cancel()
        subscription = live
        stream.progress.caughtUp()
        if !replay.isEmpty { deliver(replay, context, stream) }
        server.logger.debug("a stream caught up from the history; it reads live events again", metadata: ["at_count": "\(self.position ?? 0)"])
        return true
    }

    /// Ends a stream that a reload revoked (its last frame says why) or the shutdown finished.
    private func endAsRevokedOrFinished(_ context: ChannelHandlerContext, _ stream: SocketServer.OpenedStream) {
        end(context, lastFrame: stream.open.ending?.frame(in: stream.format))
    }

    /// Ends a stream that fell behind the broker's history, whence only the journal can resume it.
    private func endBehindTheHistory(_ context: ChannelHandlerContext, _ stream: SocketServer.OpenedStream) {
        let history = stream.source.configuration
        end(context, lastFrame: stream.format.overflowFrame(capacity: history.historyCapacity, historyBytes: history.historyByteLimit))
    }

    /// Writes `lastFrame` and the end of the response, then closes the connection.
    private func end(_ context: ChannelHandlerContext, lastFrame: String?) {
        ended = true
        if let lastFrame { context.write(wrapOutboundOut(.body(ByteBuffer(string: lastFrame))), promise: nil) }
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}
