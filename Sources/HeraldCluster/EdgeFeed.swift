public import Herald
import HeraldNATS
import HeraldNATSOutput
public import HeraldPostgres
public import Logging
public import ServiceLifecycle
import Synchronization

/// An edge daemon's events (`source: nats`): the JetStream stream that the
/// database daemons' `nats` output fills, read in stream order into the
/// broker in place of the database's journal.
///
/// Each event keeps its id, and its count is its stream sequence, so that
/// every edge gives an event the same id and count and a client may resume
/// on any of them. At start the edge reads the newest `history` messages
/// first, so that a client that moves from another edge finds its
/// `Last-Event-ID` here. Whole transactions hold: the stream marks each
/// transaction's last event (`Pgherald-Ends-Transaction`). While NATS is
/// away its ``health`` says so (`/healthz` answers 503), and the edge
/// goes on from the message after the last it read once NATS is back.
public final class EdgeFeed: Service, Sendable {
    static let backoff = BackoffPolicy(initialDelay: .milliseconds(250), maximumDelay: .seconds(10))
    /// Events handed to the broker at once, at most.
    static let batchLimit = 512

    let servers: [NATSOutputConfiguration.Server]
    let options: NATSConnectOptions
    let tls: NATSTLS?
    let stream: String
    let broker: Broker
    /// The stream's events were durable where they came from: whole transactions and exact resumes hold.
    public let health = SourceHealth(durability: .durable)
    let history: Int
    let logger: Logger
    private let position = Mutex(Position())

    private struct Position {
        /// The next stream sequence to read; nil before the first connection.
        var next: UInt64?
        var lag: UInt64?
    }

    public init(configuration: ClusterConfiguration, stream: String, broker: Broker, history: Int, version: String, logger: Logger) {
        servers = configuration.servers
        options = NATSConnectOptions(name: "pgherald edge", version: version, authentication: configuration.authentication)
        tls = configuration.tls
        self.stream = stream
        self.broker = broker
        self.history = history
        self.logger = logger
    }

    public func run() async throws {
        defer { report(.stopped) }
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { try await cancelWhenGracefulShutdown { try await self.readUntilStopped() } }
            group.addTask { await cancelWhenGracefulShutdown { await self.reportEverySecond() } }
        }
    }

    private var readPosition: SourceHealth.Position {
        let now = position.withLock { $0 }
        return .init(source: "nats stream \(stream)", position: now.next.map { $0 - 1 }, lag: now.lag)
    }

    private func report(_ status: SourceHealth.Status) {
        health.report(status, position: readPosition)
    }

    /// Shows that the feed is not stuck, for the systemd watchdog, while nothing arrives.
    /// Only the position: the reading task's reports own the state, and a
    /// state read here and written back could undo its `.reconnecting`.
    private func reportEverySecond() async {
        while !Task.isCancelled {
            do { try await Task.sleep(for: .seconds(1)) } catch { return }
            health.recordPosition(readPosition)
        }
    }

    /// Reads until cancelled; throws when nothing listens at any server at the first attempt (``NATSFirstRound``).
    private func readUntilStopped() async throws {
        var rotation = NATSServerRotation(servers: servers, backoff: Self.backoff)
        var firstRound = NATSFirstRound(servers: servers.count)
        while !Task.isCancelled {
            let address = rotation.current
            let readBefore = position.withLock { $0.next }
            let connected = Mutex(false)
            let wait: Duration
            do {
                try await NATSConnection.withConnection(host: address.host, port: address.port, options: options, tls: tls) { connection in
                    connected.withLock { $0 = true }
                    try await self.read(JetStream(connection: connection), from: address)
                }
                wait = rotation.ended(afterProgress: position.withLock { $0.next } != readBefore)
            } catch {
                if Task.isCancelled { return }
                if let refusals = firstRound.failed(connected: connected.withLock { $0 }, error) {
                    throw NATSStartFailure(key: "cluster.nats", client: "the edge", refusals: refusals)
                }
                let reason = "\(address): \(error)"
                logger.warning("cannot read the event stream; clients wait, and reading resumes after the last event read", metadata: [
                    "stream": "\(stream)", "error": "\(reason)",
                ])
                wait = rotation.ended(afterProgress: position.withLock { $0.next } != readBefore)
                report(.reconnecting(attempt: rotation.attempt, lastError: reason))
            }
            if connected.withLock({ $0 }) { firstRound.connected() }
            guard await Task.pauseBeforeRetry(for: wait) else { return }
        }
    }

    private func read(_ jetStream: JetStream, from address: NATSOutputConfiguration.Server) async throws {
        let state = try await jetStream.state(ofStream: stream)
        let start = position.withLock { position in
            if let next = position.next { return next }
            // The newest `history` messages, so that resumes from other edges find their events here.
            let newest = state.lastSequence >= UInt64(history) ? state.lastSequence - UInt64(history) + 1 : 1
            return max(newest, state.firstSequence, 1)
        }
        if start < state.firstSequence {
            logger.error("the stream no longer holds events this edge had not read; clients that were behind start again", metadata: [
                "stream": "\(stream)", "next": "\(start)", "first": "\(state.firstSequence)",
            ])
        }
        let behind = state.lastSequence >= start ? state.lastSequence - start + 1 : 0
        position.withLock { $0.lag = behind }
        report(behind > 0 ? .catchingUp : .listening)
        logger.info("reading the event stream", metadata: [
            "server": "\(address)", "stream": "\(stream)", "from": "\(start)", "behind": "\(behind)",
        ])
        var batch: [Event] = []
        var batchStart: UInt64 = 0
        // An event larger than the server's max_payload comes in parts; its count is its last part's sequence.
        var parts = NATSMessageParts.Assembler()
        for try await read in jetStream.messages(of: stream, from: start) {
            for stored in read {
                var payload = stored.message.payload
                if let part = stored.message.headers.last(where: { $0.name == NATSMessageParts.header })?.value {
                    if !batch.isEmpty { publish(&batch, from: batchStart, lag: stored.pending + 1) }
                    switch parts.add(part: part, payload: payload) {
                    case .waiting:
                        continue
                    case .skipped(let reason):
                        logger.notice("skipped a part of a large event", metadata: ["stream": "\(stream)", "sequence": "\(stored.streamSequence)", "reason": "\(reason)"])
                        if parts.isJoining { continue }
                        position.withLock { $0.next = stored.streamSequence + 1 }
                        continue
                    case .whole(let joined):
                        payload = joined
                    }
                }
                if !batch.isEmpty, stored.streamSequence != batchStart + UInt64(batch.count) { publish(&batch, from: batchStart, lag: stored.pending + 1) }
                if batch.isEmpty { batchStart = stored.streamSequence }
                if let event = decode(payload, headers: stored.message.headers, sequence: stored.streamSequence) {
                    batch.append(event)
                } else if !batch.isEmpty {
                    publish(&batch, from: batchStart, lag: stored.pending)
                }
                position.withLock { $0.next = stored.streamSequence + 1 }
                if stored.pending == 0 || batch.count >= Self.batchLimit { publish(&batch, from: batchStart, lag: stored.pending) }
            }
        }
    }

    private func publish(_ batch: inout [Event], from first: UInt64, lag: UInt64) {
        if !batch.isEmpty { broker.publish(batch, firstCount: first) }
        batch.removeAll(keepingCapacity: true)
        position.withLock { $0.lag = lag }
        report(lag == 0 ? .listening : .catchingUp)
    }

    /// The event a message (or its parts) carries, marked as its transaction's last when the stream says so; nil (logged) for anything else.
    private func decode(_ payload: [UInt8], headers: [(name: String, value: String)], sequence: UInt64) -> Event? {
        do {
            let event = try payload.withUnsafeBufferPointer { bytes throws(EventDecodingError) in try Event(payload: bytes) }
            return headers.contains { $0.name == "Pgherald-Ends-Transaction" && $0.value == "true" } ? event.endingTransaction() : event
        } catch {
            logger.error("skipped a stream message that is not a pgherald event", metadata: [
                "stream": "\(stream)", "sequence": "\(sequence)", "error": "\(error)",
            ])
            return nil
        }
    }
}
