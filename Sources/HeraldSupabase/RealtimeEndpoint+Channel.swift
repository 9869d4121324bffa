import Foundation
import Herald
import HeraldHTTP
import HeraldPostgres
import HeraldRealtime
import HummingbirdWebSocket
import Logging
import NIOCore

extension RealtimeEndpoint {
    /// The most bytes of events a channel frames at once, past the first event: its frames are
    /// held until the socket has taken them, so a client that does not read holds about one batch.
    static let batchBytes = 1 << 20

    /// Runs one joined channel that ``reserveChannel(for:)`` counted and the connection replied to: checks its bindings,
    /// subscribes, confirms with `system`, then delivers until it is left,
    /// its socket drops, its token expires or it falls behind.
    func serve(_ channel: RealtimeChannel, framing: PhoenixFraming, outbound: WebSocketOutboundWriter, socket: any Channel) async {
        let join = channel.join
        let direct = DirectFrameWriter(channel: socket)
        let writable = WritabilityWaiters.Waiter(channel: socket)
        let topic = Array(JSONValue.string(join.topic).jsonText.utf8)
        func send(_ message: PhoenixMessage) async throws {
            try await outbound.write(framing.frame(framing.encode(message)))
        }
        // Supabase's clients do not rejoin after `phx_close`.
        func end(revokedBecause reason: String) async throws {
            // A reload that changed the grant, an expired token, or row-level security checks that stopped: the reason says which.
            logger.info("ended a realtime channel", metadata: ["caller": "\(channel.caller.name)", "topic": "\(join.topic)", "reason": "\(reason)"])
            channel.markEnded()
            try await send(join.systemMessage(ok: false, reason))
            try await send(join.channelClose)
        }
        do {
            if let problem = await checkBindings(of: channel) {
                logger.info("refused a realtime channel", metadata: ["caller": "\(channel.caller.name)", "topic": "\(join.topic)", "reason": "\(problem)"])
                channel.markEnded()
                try await send(join.systemMessage(ok: false, problem))
                return
            }
            // Built only for a channel that is served: the topic's whole state is the dearest reply a join gets.
            if join.presence.enabled { broadcasts.sendPresenceState(channel.broadcastTopic, to: ObjectIdentifier(channel)) }
            // Under `rls: true` the channel reads its cohort's broker, where every event is one its role and claims may see.
            guard var source = source(of: channel) else {
                channel.markEnded()
                try await send(join.systemMessage(ok: false, "Unauthorized: row-level security is not available here"))
                return
            }
            defer { source.release() }
            let key = ResumeBook.Key(caller: channel.caller.name, topic: join.topic, bindings: join.bindings)
            let filter = Self.coarseFilter(join.bindings, topic: join.channelName)
            var resumeFrom = resumeBook.withLock { $0.take(key, at: .now) }
            // A cohort's memory lacks what none of its streams followed when it happened: such a channel
            // starts from its join, as after a restart, rather than resume with a gap.
            if let position = resumeFrom, let cohort = source.cohort, cohort.hasMissed(after: position, of: filter.tables) {
                resumeFrom = nil
            }
            let newest = source.broker.lastResumableEventID
            var (subscription, replay) = source.broker.subscribe(
                filter, resumingAfter: resumeFrom, capacity: configuration.mailboxCapacity, byteCapacity: configuration.maximumQueuedBytes, kind: "realtime"
            )
            channel.state.withLock { $0.position = replay == nil ? newest : resumeFrom }
            if let reason = channel.deliver(from: subscription) { return try await end(revokedBecause: reason) }
            defer {
                if channel.shouldRemember, let position = channel.state.withLock({ $0.position }) {
                    resumeBook.withLock { $0.remember(key, after: position, at: .now) }
                    cluster?.share(key, after: position)
                }
            }
            try await send(join.systemMessage(ok: true, "Subscribed to PostgreSQL"))
            logger.debug("realtime channel subscribed", metadata: [
                "caller": "\(channel.caller.name)", "topic": "\(join.topic)", "bindings": "\(join.bindings.count)",
                "replayed": "\(replay?.count ?? 0)",
            ])
            if resumeFrom != nil, replay == nil {
                logger.notice("a rejoining realtime channel's position is older than the history; missed events are not replayed", metadata: ["topic": "\(join.topic)"])
            }
            if let replay, try await deliver(replay, to: channel, topic: topic, framing: framing, outbound: outbound, direct: direct, writable: writable, cohort: source.serial) == false {
                return
            }
            while true {
                let delivery: Subscription.Delivery
                do {
                    delivery = try await subscription.nextDelivery(limit: 256, bytes: Self.batchBytes)
                } catch {
                    channel.state.withLock { $0.remember = true }
                    logger.warning("a realtime channel fell behind and was ended; its client rejoins", metadata: ["topic": "\(join.topic)", "capacity": "\(error.capacity)"])
                    channel.markEnded()
                    try await send(join.channelError("pgherald: the channel fell \(error.capacity) events behind"))
                    return
                }
                guard case .events(let events) = delivery else {
                    guard case .finished = delivery else { continue }
                    if channel.revokedBecause == nil, channel.takeCohortMove() {
                        // A pushed token changed the identity: on from the channel's position, in its new cohort.
                        source.release()
                        guard let moved = self.source(of: channel) else {
                            return try await end(revokedBecause: "row-level security is not available here")
                        }
                        source = moved
                        let position = channel.state.withLock { $0.position }
                        let (next, missed) = source.broker.subscribe(
                            filter, resumingAfter: position, capacity: configuration.mailboxCapacity, byteCapacity: configuration.maximumQueuedBytes, kind: "realtime"
                        )
                        subscription = next
                        if let reason = channel.deliver(from: subscription) { return try await end(revokedBecause: reason) }
                        logger.debug("a realtime channel moved to its new token's cohort", metadata: ["topic": "\(join.topic)", "caller": "\(channel.caller.name)"])
                        if let missed, try await deliver(missed, to: channel, topic: topic, framing: framing, outbound: outbound, direct: direct, writable: writable, cohort: source.serial) == false {
                            return
                        }
                        continue
                    }
                    if let reason = channel.revokedBecause { try await end(revokedBecause: reason) }
                    return
                }
                guard try await deliver(events, to: channel, topic: topic, framing: framing, outbound: outbound, direct: direct, writable: writable, cohort: source.serial) else {
                    return
                }
            }
        } catch {
            logger.debug("realtime channel ended", metadata: ["topic": "\(join.topic)", "error": "\(error)"])
        }
    }

    /// Where a channel reads its events: the daemon's broker, or the cohort of its caller's row-security identity.
    struct EventSource {
        let broker: Broker
        let cohort: RowSecurityCohort?
        let watch: UInt64?

        /// What its restricted events are cached under; nil on the daemon's broker.
        var serial: UInt64? { cohort?.serial }

        func release() {
            if let watch { cohort?.unwatch(watch) }
        }
    }

    /// The source for the channel's caller now; nil when it is under `rls: true` and the gate is not there.
    func source(of channel: RealtimeChannel) -> EventSource? {
        guard let identity = channel.caller.scope.rowSecurity else { return EventSource(broker: broker, cohort: nil, watch: nil) }
        guard let rowSecurity else { return nil }
        let cohort = rowSecurity.cohort(for: identity)
        let watch = cohort.watch { reason in channel.revoke(reason) }
        return EventSource(broker: cohort.broker, cohort: cohort, watch: watch)
    }

    /// Writes each event the channel's bindings match, all in one write when
    /// the channel is writable; false once its token has expired.
    private func deliver(
        _ events: [Event], to channel: RealtimeChannel, topic: [UInt8], framing: PhoenixFraming, outbound: WebSocketOutboundWriter,
        direct: DirectFrameWriter?, writable: WritabilityWaiters.Waiter?, cohort: UInt64?
    ) async throws -> Bool {
        // Framed once the socket takes writes: frames held for a client that does not read cost each channel a batch.
        // A socket that closed meanwhile gets nothing framed: each of a thousand channels framed its batch as it closed.
        guard await writable?.untilWritable() ?? true else { return false }
        var frames: [[UInt8]] = []
        var expired = false
        let changes = events.filter { $0.operation != .broadcast }
        var matches = changes.isEmpty ? [] : await channel.matches(changes)[...]
        for event in events {
            if event.operation == .broadcast {
                if let message = Self.databaseBroadcast(event, to: channel.join) { frames.append(framing.encode(message)) }
                continue
            }
            let (ids, expiresAt) = matches.removeFirst()
            if let expiresAt, expiresAt <= Date().timeIntervalSince1970 {
                expired = true
                break
            }
            if !ids.isEmpty, ChangePayload.carries(event) {
                frames.append(framing.encodeChange(topic: topic, payload: ChangePayload.payload(ids: ids, data: await cache.data(for: event, cohort: cohort))))
            }
        }
        if let direct, direct.canWrite {
            var buffer = ByteBufferAllocator().buffer(capacity: frames.reduce(0) { $0 + $1.count + 10 })
            for frame in frames { DirectFrameWriter.appendTextFrame(frame, to: &buffer) }
            if buffer.readableBytes > 0 { direct.write(buffer) }
        } else {
            for frame in frames { try await outbound.write(framing.frame(frame)) }
        }
        delivered.withLock { $0 += UInt64(frames.count) }
        if let last = events.last, !expired { channel.state.withLock { $0.position = last.id } }
        guard !expired else {
            channel.markEnded()
            try await outbound.write(framing.frame(framing.encode(channel.join.systemMessage(ok: false, "Token has expired"))))
            try await outbound.write(framing.frame(framing.encode(channel.join.channelClose)))
            return false
        }
        return true
    }

    /// Parses, grants and checks each binding against the catalog; the
    /// `system` error text for the first that fails, in Supabase's words.
    private func checkBindings(of channel: RealtimeChannel) async -> String? {
        let scope = channel.caller.scope
        var bindings: [RealtimeChannel.Binding] = []
        for binding in channel.join.bindings {
            let requested: EventFilter
            do {
                requested = try binding.eventFilter()
            } catch {
                return "Error parsing `filter` params: \(error.message)"
            }
            let granted: EventFilter
            do {
                granted = try requested.narrowed(to: scope)
            } catch {
                return "Unauthorized: \(error.message)"
            }
            do {
                if let problem = try await catalog.validate(requested) {
                    return problem.code == .unknownTable
                        ? "Unable to subscribe to changes with given parameters: \(problem.message)"
                        : "Error parsing `filter` params: \(problem.message)"
                }
            } catch {
                return "Unable to subscribe to changes: pgherald cannot read the table catalog (\(error))"
            }
            if let identity = scope.rowSecurity, let rowSecurity {
                do throws(RowSecurityError) {
                    if let refusal = try await rowSecurity.columnRefusal(for: requested, as: identity) {
                        return "Unable to subscribe to changes with given parameters: \(refusal)"
                    }
                } catch {
                    return "Unable to subscribe to changes: \(error.reason)"
                }
            }
            bindings.append(.init(id: binding.id, requested: requested, granted: granted))
        }
        channel.state.withLock { state in
            // A token pushed while the bindings were checked is applied to them now.
            state.bindings = bindings.map { binding in
                var binding = binding
                binding.granted = (try? binding.requested.narrowed(to: state.caller.scope)) ?? binding.granted
                return binding
            }
        }
        return nil
    }

    /// A message `pgherald.send` published to the channel's topic with the
    /// channel's privacy, as Supabase clients receive broadcasts; nil for others.
    static func databaseBroadcast(_ event: Event, to join: RealtimeJoin) -> PhoenixMessage? {
        guard event.table.schema == EventFilter.topicSchema, event.table.name == join.channelName,
              let message = event.new, let name = message["event"], (message["private"] == .bool(true)) == join.isPrivate
        else { return nil }
        return .push(topic: join.topic, event: "broadcast", payload: .object([
            "type": .string("broadcast"), "event": name, "payload": message["payload"] ?? .object([:]),
        ]))
    }

    /// One broker filter that passes every event some binding wants, and the
    /// database's broadcasts to `topic`; each binding's own filter then picks its events.
    static func coarseFilter(_ bindings: [RealtimeBinding], topic: String) -> EventFilter {
        var filter = EventFilter(operations: [.broadcast])
        let topicTable = TableName(schema: EventFilter.topicSchema, name: topic)
        guard !bindings.isEmpty else {
            filter.tables = [topicTable]
            return filter
        }
        var tables: Set<TableName> = []
        var schemas: Set<String> = []
        var everySchema = false
        for binding in bindings {
            filter.operations.formUnion(binding.operations)
            if let table = binding.table {
                tables.insert(TableName(schema: binding.schema == "*" ? "public" : binding.schema, name: table))
            } else if binding.schema == "*" {
                everySchema = true
            } else {
                schemas.insert(binding.schema)
            }
        }
        if everySchema { return filter }
        tables.insert(topicTable)
        if schemas.isEmpty {
            filter.tables = tables
        } else {
            filter.schemas = schemas.union(tables.map(\.schema))
        }
        return filter
    }
}
