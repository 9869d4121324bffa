import DequeModule
public import Herald
public import HeraldNATS
public import HeraldOutput
public import HeraldPostgres
public import Logging
public import ServiceLifecycle
import Synchronization

/// Publishes every matching event to a JetStream stream, exactly once.
///
/// It reads the journal through a cursor of its own (``JournalFeed``) and
/// moves the cursor only once JetStream has acknowledged every event of a
/// batch. Each event is published with `Nats-Msg-Id` set to its id, so a
/// batch published again after a crash, a NATS restart or a cut connection
/// is stored once: JetStream drops the repeats within its duplicate window.
/// Events go out in delivery order on one connection, up to
/// ``NATSOutputConfiguration/maximumInFlight`` awaiting acknowledgement.
/// While NATS is away the backlog waits in the journal, and the output tries
/// the next server with backoff.
public final class NATSOutput: Service, Sendable {
    /// What the output has done, for `/stats` and `/metrics`.
    public struct Statistics: Sendable, Hashable {
        public var published: Int64 = 0
        /// Acknowledged as repeats within the duplicate window (and not stored again).
        public var duplicates: Int64 = 0
        public var failures: Int64 = 0
        /// Why it is not publishing, while it is not.
        public var problem: String?
    }

    /// Journal rows read per batch.
    static let batchRows = 1000
    static let backoff = BackoffPolicy(initialDelay: .milliseconds(250), maximumDelay: .seconds(30))

    let configuration: NATSOutputConfiguration
    let journal: JournalFeed
    /// Says whether a batch's last event ends its transaction.
    let reader: JournalReader
    let logger: Logger
    let version: String
    let counters = Mutex(Statistics())
    private let stopping = Mutex(false)
    /// Answered once the cursor is placed: events wait in the journal from then on, whether NATS answers or not.
    let started = OneShotFlag()

    public init(configuration: NATSOutputConfiguration, journal: JournalFeed, reader: JournalReader, version: String, logger: Logger) {
        self.configuration = configuration
        self.journal = journal
        self.reader = reader
        self.version = version
        self.logger = logger
    }

    public var statistics: Statistics { counters.withLock { $0 } }

    private var isStopping: Bool { stopping.withLock { $0 } }

    public func run() async throws {
        defer { started.set(false) }
        try await withGracefulShutdownHandler {
            try await publishUntilStopped()
        } onGracefulShutdown: {
            self.stopping.withLock { $0 = true }
            self.journal.stopWaiting()
        }
    }

    private func publishUntilStopped() async throws {
        guard try await openCursor() else { return }
        started.set(true)
        // Each batch the broker delivers means the journal has new rows: read them at once rather than at the next idle look.
        let ringing = Task { await journal.ringOnEvents(kind: "nats") }
        defer { ringing.cancel() }
        var rotation = NATSServerRotation(servers: configuration.servers, backoff: Self.backoff)
        var firstRound = NATSFirstRound(servers: configuration.servers.count)
        while !isStopping, !Task.isCancelled {
            let address = rotation.current
            let publishedBefore = statistics.published
            let connected = Mutex(false)
            do {
                try await NATSConnection.withConnection(host: address.host, port: address.port, options: connectOptions, tls: configuration.tls) { connection in
                    connected.withLock { $0 = true }
                    let jetStream = JetStream(connection: connection, timeout: self.configuration.acknowledgementTimeout)
                    try await self.prepareStream(jetStream)
                    // Connected with the stream in place: an idle output is healthy again before its next event.
                    self.counters.withLock { $0.problem = nil }
                    self.logger.info("publishing to NATS", metadata: ["server": "\(address)", "stream": "\(self.configuration.stream)"])
                    try await self.publishBatches(jetStream)
                }
            } catch {
                // Stopping, not failing: the connection ended because the daemon stops.
                if isStopping || Task.isCancelled { return }
                counters.withLock { $0.failures += 1 }
                if let refusals = firstRound.failed(connected: connected.withLock { $0 }, error) {
                    throw NATSStartFailure(key: "nats.servers", client: "the NATS output", refusals: refusals)
                }
                if firstRound.isOpen {
                    logger.notice("nothing listens at this NATS server; trying the next", metadata: ["server": "\(address)", "error": "\(error)"])
                } else {
                    report("cannot publish to \(address); events wait in the journal", error)
                }
            }
            if connected.withLock({ $0 }) { firstRound.connected() }
            // A connection that published goes back to the first, short delay.
            guard await Task.pauseBeforeRetry(for: rotation.ended(afterProgress: statistics.published > publishedBefore)) else { return }
        }
    }

    private var connectOptions: NATSConnectOptions {
        NATSConnectOptions(name: "pgherald", version: version, authentication: configuration.authentication)
    }

    /// Creates or checks the stream, as configured.
    private func prepareStream(_ jetStream: JetStream) async throws {
        if configuration.createStream {
            try await jetStream.createOrUpdate(.init(
                name: configuration.stream, subjects: [configuration.subject.wildcard], duplicateWindow: configuration.duplicateWindow,
                replicas: configuration.replicas
            ))
        } else if try await jetStream.stream(named: configuration.stream) == nil {
            throw NATSError(.noStream, "JetStream has no stream \(configuration.stream): create it (taking \(configuration.subject.wildcard)), or set nats.create_stream: true")
        }
    }

    /// Batch after batch from the journal, each acknowledged whole before the cursor moves; returns once stopping.
    private func publishBatches(_ jetStream: JetStream) async throws {
        while true {
            let batch: JournalFeed.Batch
            do {
                batch = try await journal.next(limit: Self.batchRows, waiting: !isStopping)
            } catch {
                if isStopping || Task.isCancelled { return }
                report("cannot read the journal; NATS publishing waits and resumes where it stopped", error)
                try await Task.sleep(for: .seconds(1))
                continue
            }
            if batch.events.isEmpty {
                if isStopping || Task.isCancelled { return }
                continue
            }
            let ended = try await transactionsEnded(in: batch.events)
            try await publish(batch.events.filter(configuration.publishes), endingTransactions: ended, jetStream)
            await commitUntilRecorded(batch)
            counters.withLock { $0.problem = nil }
        }
    }

    /// The transactions whose last event is in `events`: every one but the
    /// batch's last, as events come transaction by transaction, and that one
    /// when the journal says so.
    private func transactionsEnded(in events: [Event]) async throws -> Set<String> {
        guard let last = events.last else { return [] }
        var ended = Set(events.dropLast().map(\.transactionID))
        ended.remove(last.transactionID)
        if try await reader.endsTransaction(last) { ended.insert(last.transactionID) }
        return ended
    }

    /// Publishes in order, up to the window awaiting acknowledgement; returns
    /// once every one is acknowledged. The last event published of each
    /// transaction in `ended` carries `Pgherald-Ends-Transaction`.
    private func publish(_ events: [Event], endingTransactions ended: Set<String>, _ jetStream: JetStream) async throws {
        // Each message awaiting its acknowledgement, and whether it is its event's last (the event counts once, there).
        var waiting: Deque<(reply: String, subject: String, endsEvent: Bool)> = []
        var acknowledged = 0
        var repeats = 0
        func acknowledgeOldest() async throws {
            let oldest = waiting.removeFirst()
            let duplicate = try await jetStream.acknowledgement(of: oldest.reply, subject: oldest.subject).duplicate == true
            guard oldest.endsEvent else { return }
            if duplicate { repeats += 1 }
            acknowledged += 1
        }
        let maximumPayload = jetStream.connection.info?.maximumPayload ?? NATSServerInfo.defaultMaximumPayload
        for (index, event) in events.enumerated() {
            let subject = configuration.subject.subject(for: event)
            var headers = [("Pgherald-Count", String(event.count)), ("Pgherald-Txid", event.transactionID), ("Pgherald-Table", "\(event.table)")]
            let lastOfItsTransaction = index == events.count - 1 || events[index + 1].transactionID != event.transactionID
            if lastOfItsTransaction, ended.contains(event.transactionID) { headers.append(("Pgherald-Ends-Transaction", "true")) }
            let parts = NATSMessageParts.split(event.jsonBytes, messageID: event.id, headers: headers, maximumPayload: maximumPayload)
            if parts.count > 1 {
                logger.debug("an event larger than the NATS server's max_payload goes in parts", metadata: [
                    "id": "\(event.id)", "bytes": "\(event.jsonBytes.count)", "parts": "\(parts.count)", "max_payload": "\(maximumPayload)",
                ])
            }
            for (partIndex, part) in parts.enumerated() {
                if waiting.count >= configuration.maximumInFlight { try await acknowledgeOldest() }
                let reply = try await jetStream.send(subject: subject, messageID: part.messageID, headers: part.headers, payload: Array(part.payload))
                waiting.append((reply, subject, partIndex == parts.count - 1))
            }
        }
        while !waiting.isEmpty { try await acknowledgeOldest() }
        counters.withLock { counters in
            counters.published += Int64(acknowledged - repeats)
            counters.duplicates += Int64(repeats)
        }
    }

    /// Opens the cursor, retrying while PostgreSQL is away; false when stopping came first.
    private func openCursor() async throws -> Bool {
        while !isStopping, !Task.isCancelled {
            do {
                try await journal.open()
                return true
            } catch where error.code == .queryFailed {
                throw error
            } catch where error.code == .stopped {
                // The listener did not connect: its error is the daemon's.
                return false
            } catch {
                report("cannot open the NATS output's cursor; retrying", error)
                guard await Task.pauseBeforeRetry(for: .seconds(1)) else { return false }
            }
        }
        return false
    }

    /// Moves the cursor past an acknowledged batch; if the daemon stops
    /// first, the batch is published again at the next start, and JetStream drops the repeats.
    private func commitUntilRecorded(_ batch: JournalFeed.Batch) async {
        while true {
            do {
                try await journal.commit(batch)
                return
            } catch {
                if isStopping || Task.isCancelled { return }
                report("cannot record the NATS output's position; retrying", error)
                guard await Task.pauseBeforeRetry(for: .seconds(1)) else { return }
            }
        }
    }

    /// Logs a problem once, when it starts or changes, and shows it in `/stats`.
    private func report(_ message: String, _ error: any Error) {
        let reason = "\(message): \(error)"
        let changed = counters.withLock { counters in
            defer { counters.problem = reason }
            return counters.problem != reason
        }
        if changed { logger.error("\(message)", metadata: ["error": "\(error)"]) }
    }
}
