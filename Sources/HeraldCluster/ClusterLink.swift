import Foundation
public import Herald
import HeraldNATS
import HeraldNATSOutput
public import HeraldOutput
public import HeraldPostgres
package import HeraldRealtime
public import Logging
public import ServiceLifecycle
import Synchronization

/// This daemon's membership of a cluster: it sends its clients' broadcasts
/// and presence changes to the other members over NATS core subjects under
/// `pgherald-cluster.NAME`, and hands theirs to the realtime endpoint's
/// ``BroadcastHub``.
///
/// Broadcasts are at most once, as between clients of one daemon. Presence
/// is kept consistent by ``ClusterMessage``'s versions and state requests,
/// and a member that stops sending heartbeats leaves after
/// ``ClusterConfiguration/memberTimeout``. While NATS is away the link
/// tries the next server with backoff; the other members' presence leaves
/// this daemon's clients after the timeout, and comes back with their state
/// once the link does.
public final class ClusterLink: Service, Sendable {
    /// What the hub hands the link, to go out in this order.
    public struct Relay: Sendable {
        let outbound: AsyncStream<Outbound>.Continuation
        let memberTimeout: Duration
        /// What fits in one cluster message, checked where tracks and broadcasts enter.
        let limit: ClusterMessageLimit
    }

    enum Outbound: Sendable {
        case presence(BroadcastHub.Topic, version: UInt64, joins: [PresenceEntry], leaves: [PresenceEntry])
        case broadcast(BroadcastHub.Topic, PhoenixMessage)
        case heartbeat
        /// This daemon's whole presence, taken when it goes out, so that it
        /// follows every change numbered before it.
        case state
        case stateRequest(member: String)
        case resumePosition(ResumeBook.Key, eventID: String)
    }

    struct Counters: Sendable {
        var server: String?
        var problem: String?
        var broadcastsSent: UInt64 = 0
        var broadcastsReceived: UInt64 = 0
        var presenceSent: UInt64 = 0
        var presenceReceived: UInt64 = 0
        var stateRequests: UInt64 = 0
        var failures: UInt64 = 0
        /// Messages not sent for being over the server's `max_payload` (a limit that shrank under a running daemon).
        var oversized: UInt64 = 0
        /// Another daemon heard under this member's id: its incarnation, and when it was last heard.
        var twin: (incarnation: String, heard: ContinuousClock.Instant)?
    }

    static let backoff = BackoffPolicy(initialDelay: .milliseconds(250), maximumDelay: .seconds(10))
    /// Messages waiting to go out; past it, broadcasts are missed and presence is repaired by a state request.
    static let outboundBacklog = 10_000

    let configuration: ClusterConfiguration
    /// This daemon among the members.
    let member: String
    /// Changes at every start, so that the others drop what this daemon tracked before.
    let incarnation: String
    let broker: Broker
    /// Says how far an edge's stream has been read.
    let health: SourceHealth
    /// What the daemon's event source offers: a member with the journal is a database daemon, one without an edge.
    let sourceOffers: EventSourceOffers
    let version: String
    let logger: Logger
    public let relay: Relay
    private let outbound: AsyncStream<Outbound>
    private let hub = Mutex<BroadcastHub?>(nil)
    private let resumePositions = Mutex<(@Sendable (ResumeBook.Key, String) -> Void)?>(nil)
    private let connection = Mutex<NATSConnection?>(nil)
    let counters = Mutex(Counters())

    public init(configuration: ClusterConfiguration, member: String, broker: Broker, health: SourceHealth, sourceOffers: EventSourceOffers, version: String, logger: Logger) {
        self.configuration = configuration
        self.member = member
        self.broker = broker
        self.health = health
        self.sourceOffers = sourceOffers
        self.version = version
        self.logger = logger
        incarnation = String(UInt64.random(in: 0...UInt64.max), radix: 36)
        let (outbound, continuation) = AsyncStream<Outbound>.makeStream(bufferingPolicy: .bufferingOldest(Self.outboundBacklog))
        self.outbound = outbound
        relay = Relay(
            outbound: continuation, memberTimeout: configuration.memberTimeout,
            limit: ClusterMessageLimit(member: member, incarnation: incarnation)
        )
    }

    /// `edge` for a daemon fed by the stream, `database` for one that reads the journal.
    var role: String { sourceOffers.contains(.journal) ? "database" : "edge" }

    /// The hub whose clients this link serves; set once, before `run()`.
    package func attach(_ hub: BroadcastHub) {
        self.hub.withLock { $0 = hub }
    }

    var hubReference: BroadcastHub? { hub.withLock { $0 } }

    /// Where positions that other members' Supabase channels stopped at go; set once, before `run()`.
    package func onResumePosition(_ remember: @escaping @Sendable (ResumeBook.Key, String) -> Void) {
        resumePositions.withLock { $0 = remember }
    }

    /// Tells the other members where a channel stopped, so that its client may rejoin on any of them.
    package func share(_ key: ResumeBook.Key, after eventID: String) {
        relay.outbound.yield(.resumePosition(key, eventID: eventID))
    }

    /// How long a graceful stop waits for the messages queued before it (where channels stopped) to go out.
    static let drainLimit = Duration.seconds(2)

    public func run() async throws {
        let (sent, allSent) = AsyncStream<Never>.makeStream()
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask {
                await self.sendOutbound()
                allSent.finish()
            }
            group.addTask { await cancelWhenGracefulShutdown { await self.beat() } }
            group.addTask {
                defer { self.relay.outbound.finish() }
                try await withThrowingTaskGroup { connection in
                    connection.addTask { try await self.connectUntilStopped() }
                    // The outputs stop before the link: the positions their channels stopped at, queued
                    // last, go out before the connection closes, so that clients rejoin another member there.
                    connection.addTask {
                        try? await gracefulShutdown()
                        self.relay.outbound.finish()
                        await withTaskGroup(of: Void.self) { drain in
                            drain.addTask { for await _ in sent {} }
                            drain.addTask { try? await Task.sleep(for: Self.drainLimit) }
                            await drain.next()
                            drain.cancelAll()
                        }
                    }
                    try await connection.next()
                    connection.cancelAll()
                }
            }
        }
    }

    /// Keeps a connection to one of the servers, reading the cluster's subjects, until cancelled;
    /// throws when nothing listens at any server at the first attempt (``NATSFirstRound``).
    private func connectUntilStopped() async throws {
        var rotation = NATSServerRotation(servers: configuration.servers, backoff: Self.backoff)
        var firstRound = NATSFirstRound(servers: configuration.servers.count)
        while !Task.isCancelled {
            let address = rotation.current
            let options = NATSConnectOptions(name: "pgherald cluster \(member)", version: version, authentication: configuration.authentication)
            let received = Mutex(false)
            let connected = Mutex(false)
            do {
                try await NATSConnection.withConnection(host: address.host, port: address.port, options: options, tls: configuration.tls) { connection in
                    connected.withLock { $0 = true }
                    self.relay.limit.serverTakes(connection.info?.maximumPayload ?? ClusterMessageBudget.defaultMaximumPayload)
                    let messages = try await connection.subscribe(to: "\(self.configuration.subjectPrefix).>")
                    self.connection.withLock { $0 = connection }
                    self.counters.withLock {
                        $0.server = "\(address)"
                        $0.problem = nil
                    }
                    self.logger.info("joined the cluster", metadata: [
                        "cluster": "\(self.configuration.name)", "member": "\(self.member)", "server": "\(address)",
                    ])
                    // Heard at once by the others, who then ask for this daemon's presence.
                    self.relay.outbound.yield(.heartbeat)
                    for await batch in messages {
                        received.withLock { $0 = true }
                        for message in batch { self.take(message.payload) }
                    }
                }
            } catch where !Task.isCancelled {
                if let refusals = firstRound.failed(connected: connected.withLock { $0 }, error) {
                    throw NATSStartFailure(key: "cluster.nats", client: "the cluster", refusals: refusals)
                }
                counters.withLock {
                    $0.failures += 1
                    $0.problem = "\(error)"
                }
                logger.warning("lost the cluster's NATS server; presence of the other members leaves after the member timeout", metadata: [
                    "server": "\(address)", "error": "\(error)",
                ])
            } catch {
                // Cancelled: the daemon stops, and the connection ended for that.
            }
            connection.withLock { $0 = nil }
            counters.withLock { $0.server = nil }
            if connected.withLock({ $0 }) { firstRound.connected() }
            guard await Task.pauseBeforeRetry(for: rotation.ended(afterProgress: received.withLock { $0 })) else { return }
        }
    }

    /// One message from another member.
    private func take(_ payload: [UInt8]) {
        guard let message = ClusterMessage(bytes: payload) else { return }
        guard message.sender != member else {
            if case .heartbeat(let heartbeat) = message, heartbeat.incarnation != incarnation { heardTwin(heartbeat.incarnation) }
            return
        }
        switch message {
        case .stateRequest(let target, _):
            if target == member { relay.outbound.yield(.state) }
        case .broadcast:
            counters.withLock { $0.broadcastsReceived += 1 }
        case .presenceDiff, .presenceState:
            counters.withLock { $0.presenceReceived += 1 }
        case .resumePosition(_, let key, let eventID):
            resumePositions.withLock { $0 }?(key, eventID)
            return
        case .heartbeat:
            break
        }
        guard let hub = hub.withLock({ $0 }) else { return }
        if let wanted = hub.receive(message, now: .now) {
            counters.withLock { $0.stateRequests += 1 }
            relay.outbound.yield(.stateRequest(member: wanted))
        }
    }

    /// Another daemon speaks under this member's id: each would take the
    /// other's presence and broadcasts for its own and drop them, and the
    /// cluster would split in silence. Said at once, and in `/healthz` while it lasts.
    private func heardTwin(_ other: String) {
        let isNew = counters.withLock { counters in
            defer { counters.twin = (other, .now) }
            return counters.twin?.incarnation != other
        }
        guard isNew else { return }
        logger.error("another daemon is this cluster's member \(member): members must have ids of their own, or each drops what the other sends; set cluster.member on each (by default HOSTNAME/NAME/PID)", metadata: [
            "cluster": "\(configuration.name)", "member": "\(member)",
        ])
    }

    /// Why this member is not whole while a twin was heard within the member timeout.
    func twinProblem(now: ContinuousClock.Instant) -> String? {
        guard let twin = counters.withLock({ $0.twin }), now - twin.heard <= configuration.memberTimeout else { return nil }
        return "another daemon is cluster member \(member): set cluster.member on each"
    }

    /// Heartbeats, and the expiry of silent members, every ``ClusterConfiguration/heartbeat`` until cancelled.
    private func beat() async {
        while !Task.isCancelled {
            do { try await Task.sleep(for: configuration.heartbeat) } catch { return }
            relay.outbound.yield(.heartbeat)
            guard let hub = hub.withLock({ $0 }) else { continue }
            for gone in hub.expireSilentMembers(now: .now) {
                logger.notice("a cluster member went silent; its clients' presence left", metadata: [
                    "member": "\(gone)", "timeout": "\(configuration.memberTimeout)",
                ])
            }
        }
    }

    /// Publishes what the hub and the link hand over, in order; while there
    /// is no connection, it is dropped (presence is repaired once the link is back).
    private func sendOutbound() async {
        for await item in outbound {
            guard let connection = connection.withLock({ $0 }) else { continue }
            let budget = relay.limit.budget
            for message in clusterMessages(item, budget: budget) {
                let payload = Array(message.json.jsonText.utf8)
                // nats-server cuts a connection that publishes more than its max_payload.
                guard payload.count <= budget.maximumPayload else {
                    counters.withLock { $0.oversized += 1 }
                    logger.warning("a cluster message is larger than the NATS server's max_payload and was not sent", metadata: [
                        "bytes": "\(payload.count)", "max_payload": "\(budget.maximumPayload)", "subject": "\(Self.subject(of: message))",
                    ])
                    continue
                }
                let subject = "\(configuration.subjectPrefix).\(Self.subject(of: message))"
                do {
                    try await connection.publish(subject: subject, payload: payload)
                } catch {
                    continue
                }
                counters.withLock { counters in
                    switch message {
                    case .broadcast: counters.broadcastsSent += 1
                    case .presenceDiff, .presenceState: counters.presenceSent += 1
                    case .heartbeat, .stateRequest, .resumePosition: break
                    }
                }
            }
        }
    }

    /// What `item` goes out as: one message, or a whole presence state in
    /// parts that each fit the server's `max_payload`.
    private func clusterMessages(_ item: Outbound, budget: ClusterMessageBudget) -> [ClusterMessage] {
        switch item {
        case .presence(let topic, let version, let joins, let leaves):
            let diff = ClusterMessage.presenceDiff(.init(member: member, incarnation: incarnation, version: version, topic: topic, joins: joins, leaves: leaves))
            // A replacing track whose old and new metas fit apart but not together: the
            // whole state, in parts, carries the change (it follows every change numbered before it).
            return budget.fits(diff) ? [diff] : wholeState(budget: budget)
        case .state:
            return wholeState(budget: budget)
        default:
            return clusterMessage(item).map { [$0] } ?? []
        }
    }

    private func wholeState(budget: ClusterMessageBudget) -> [ClusterMessage] {
        guard let presence = hub.withLock({ $0 })?.localPresence() else { return [] }
        let state = ClusterMessage.PresenceState(member: member, incarnation: incarnation, version: presence.version, entries: presence.entries)
        let split = PresenceStateSplitter(maximumPayload: budget.maximumPayload).split(state)
        if !split.omitted.isEmpty {
            logger.warning("presence entries larger than the NATS server's max_payload stay on this member", metadata: [
                "entries": "\(split.omitted.count)", "max_payload": "\(budget.maximumPayload)",
            ])
        }
        return split.parts.map(ClusterMessage.presenceState)
    }

    private func clusterMessage(_ item: Outbound) -> ClusterMessage? {
        switch item {
        case .presence(let topic, let version, let joins, let leaves):
            return .presenceDiff(.init(member: member, incarnation: incarnation, version: version, topic: topic, joins: joins, leaves: leaves))
        case .broadcast(let topic, let message):
            return .broadcast(.init(member: member, topic: topic, message: message))
        case .heartbeat:
            let counts = hub.withLock { $0 }?.localCounts() ?? (version: 0, channels: 0, presences: 0)
            let feed = health.position
            return .heartbeat(.init(
                member: member, incarnation: incarnation, version: counts.version, role: role,
                lastEventID: broker.lastResumableEventID, channels: counts.channels, streamSequence: feed?.position, streamLag: feed?.lag
            ))
        case .state:
            guard let presence = hub.withLock({ $0 })?.localPresence() else { return nil }
            return .presenceState(.init(member: member, incarnation: incarnation, version: presence.version, entries: presence.entries))
        case .stateRequest(let target):
            return .stateRequest(member: target, requester: member)
        case .resumePosition(let key, let eventID):
            return .resumePosition(member: member, key: key, eventID: eventID)
        }
    }

    private static func subject(of message: ClusterMessage) -> String {
        switch message {
        case .heartbeat: "heartbeat"
        case .presenceDiff, .presenceState, .stateRequest: "presence"
        case .broadcast: "broadcast"
        case .resumePosition: "resume"
        }
    }
}
