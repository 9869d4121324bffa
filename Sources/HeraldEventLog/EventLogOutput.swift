import Dispatch
public import Herald
public import HeraldOutput
public import HeraldPostgres
public import Logging
public import ServiceLifecycle
import Synchronization

/// Appends every event to the event log as one JSON line.
///
/// Durable (the default, ``EventLogConfiguration/feed``): it reads the
/// journal through a cursor of its own, behind the listener, and moves the
/// cursor only once a batch is written, so a SIGKILL, a full disk, a
/// PostgreSQL restart or a slow disk loses nothing; after a SIGKILL the lines
/// written since the last move appear again, with the same ids. Lines carry
/// the change count the broker gave each event (0 for events an earlier run
/// delivered). Live (`feed: live`, or the default on an install without a
/// journal), it is a broker subscriber: if it falls
/// ``EventLogConfiguration/mailboxCapacity`` events behind, it loses those
/// events, says how many, and carries on.
///
/// Writes happen on a queue of its own, so a slow disk stalls only the log.
/// A batch that cannot be written is cut back to a whole line; durable, it
/// is written again until the disk has room.
public final class EventLogOutput: Sendable {
    /// What the log has done, for `/stats` and `/metrics`.
    public struct Statistics: Sendable, Hashable {
        public var written: Int64 = 0
        public var failedWrites: Int64 = 0
        public var overflows: Int64 = 0
        public var rotations: Int64 = 0
        /// Nil until the listener has said whether the database has a journal.
        public var feed: OutputStatistics.Feed?
        /// Why it is not writing, while it is not.
        public var problem: String?
    }

    /// How often a durable log tries a batch again that could not be written, or a journal it could not read.
    static let retryInterval: Duration = .seconds(1)
    /// Journal rows read per batch.
    static let batchRows = 1000

    let broker: Broker
    let health: SourceHealth
    /// What the event source offers: without durable feeds (an edge), the log is live.
    let sourceOffers: EventSourceOffers
    let logger: Logger
    let wantedFeed: OutputStatistics.Feed
    let feedIsSet: Bool
    let journal: JournalFeed
    /// The live subscription, taken at once so that a live log (chosen, or
    /// the default's fallback) misses nothing after start; dropped when the
    /// log turns out durable, and replaced after an overflow.
    let subscription: Mutex<Subscription?>
    let stopping = Mutex(false)
    /// Answered once the feed is chosen and, when durable, its cursor placed.
    let started = OneShotFlag()
    private let queue = DispatchQueue(label: "pgherald.eventlog")
    private let file: QueueConfinedFile
    let counters = Mutex(Statistics())

    /// Opens (or creates) the file; a live log subscribes here.
    public init(configuration: EventLogConfiguration, broker: Broker, health: SourceHealth, sourceOffers: EventSourceOffers, journal: JournalFeed, logger: Logger) throws(EventLogError) {
        self.broker = broker
        self.health = health
        self.sourceOffers = sourceOffers
        self.logger = logger
        self.journal = journal
        wantedFeed = configuration.feed
        feedIsSet = configuration.feedIsSet
        file = QueueConfinedFile(try EventLogFile(configuration: configuration))
        let surelyDurable = configuration.feed == .durable && configuration.feedIsSet
        subscription = Mutex(surelyDurable ? nil : broker.subscribe(capacity: configuration.mailboxCapacity, kind: "eventlog"))
    }

    public var statistics: Statistics { counters.withLock { $0 } }

    public func run() async throws {
        defer { started.set(false) }
        try await withGracefulShutdownHandler {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await self.writeEvents() }
                group.addTask { await self.syncPeriodically() }
                try await group.next()
                group.cancelAll()
            }
            await onQueue { file in try? file.sync() }
        } onGracefulShutdown: {
            self.stopping.withLock { $0 = true }
            self.subscription.withLock { $0 }?.cancel()
            self.journal.stopWaiting()
        }
    }

    /// Reopens the path (after logrotate moved the file), taking new settings if given.
    public func reopen(with configuration: EventLogConfiguration? = nil) async {
        let outcome: Result<Void, EventLogError> = await onQueue { file in Result { () throws(EventLogError) in try file.reopen(with: configuration) } }
        switch outcome {
        case .success:
            logger.info("reopened the event log", metadata: ["path": "\(configuration?.path ?? "(same)")"])
        case .failure(let error):
            logger.error("cannot reopen the event log; events are not logged until a reload succeeds", metadata: ["error": "\(error)"])
        }
    }

    private func writeEvents() async throws {
        let feed = try await chooseFeed()
        counters.withLock { $0.feed = feed }
        started.set(true)
        switch feed {
        case .durable:
            subscription.withLock { subscription in
                subscription?.cancel()
                subscription = nil
            }
            logger.info("the event log reads the journal through its own cursor", metadata: ["cursor": "\(journal.daemon)/\(journal.output)"])
            try await writeFromJournal()
        case .live:
            try await writeLiveEvents()
        }
    }

    /// Durable where the install keeps a journal (the cursor is open then);
    /// live where it was asked for, or where the default cannot be durable.
    private func chooseFeed() async throws -> OutputStatistics.Feed {
        // An edge reads no journal; its configuration refuses a durable log that was asked for.
        guard wantedFeed == .durable, sourceOffers.contains(.durableFeeds), await health.waitUntilConnected() else { return .live }
        do {
            guard health.durability != .notifyOnly else {
                throw EventLogError(description: "event_log.feed is durable, but the database was installed notify-only and keeps no journal; use feed: live, or install durable")
            }
            try await openCursor()
            return .durable
        } catch where !feedIsSet {
            logger.notice("the event log is live: a live log loses events when it falls behind; install durable (or again, to add pgherald.output_cursor) for one that loses nothing", metadata: ["reason": "\(error)"])
            return .live
        }
    }

    private var isStopping: Bool { stopping.withLock { $0 } }

    private func writeFromJournal() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await self.journal.ringOnEvents(kind: "eventlog") }
            defer { group.cancelAll() }
            var failure: String?
            while true {
                let batch: JournalFeed.Batch
                do {
                    batch = try await journal.next(limit: Self.batchRows, waiting: !isStopping)
                } catch {
                    guard !isStopping, !Task.isCancelled else { return }
                    report(&failure, "cannot read the journal; the event log waits and resumes where it stopped", error)
                    guard await Task.pauseBeforeRetry(for: Self.retryInterval) else { return }
                    continue
                }
                if batch.events.isEmpty {
                    if isStopping || Task.isCancelled { return }
                    continue
                }
                // Row changes only: broadcasts are for those who subscribe to their topics.
                guard await writeUntilWritten(batch.events.filter { $0.operation != .broadcast }, failure: &failure) else { return }
                await commitUntilRecorded(batch, failure: &failure)
                if failure != nil {
                    logger.info("the event log is writing again")
                    failure = nil
                    counters.withLock { $0.problem = nil }
                }
            }
        }
    }

    private func openCursor() async throws {
        var failure: String?
        while true {
            do {
                try await journal.open()
                return
            } catch where error.code == .queryFailed {
                throw error
            } catch {
                if isStopping || Task.isCancelled { return }
                report(&failure, "cannot open the event log's cursor; retrying", error)
                guard await Task.pauseBeforeRetry(for: Self.retryInterval) else { return }
            }
        }
    }

    /// Writes the batch, again and again while the disk refuses it; false when shutdown came first (the cursor has not moved, so nothing is lost).
    private func writeUntilWritten(_ events: [Event], failure: inout String?) async -> Bool {
        let lines = events.map { $0.jsonBytes + [UInt8(ascii: "\n")] }
        while true {
            switch await append(lines) {
            case .success:
                return true
            case .failure(let error):
                report(&failure, "cannot write the event log; the batch waits in the journal and is written when the disk has room", error)
                guard !isStopping else { return false }
                await journal.markInUse()
                guard await Task.pauseBeforeRetry(for: Self.retryInterval) else { return false }
            }
        }
    }

    /// Moves the cursor past a written batch. While PostgreSQL is away it
    /// tries again; if the daemon stops first, the batch is written again
    /// at the next start, which only a crash would do otherwise.
    private func commitUntilRecorded(_ batch: JournalFeed.Batch, failure: inout String?) async {
        while true {
            do {
                try await journal.commit(batch)
                return
            } catch {
                if isStopping || Task.isCancelled { return }
                report(&failure, "cannot record the event log's position; retrying", error)
                guard await Task.pauseBeforeRetry(for: Self.retryInterval) else { return }
            }
        }
    }

    /// Logs a problem once, when it starts or changes, and shows it in `/stats`.
    private func report(_ failure: inout String?, _ message: String, _ error: any Error) {
        let reason = "\(message): \(error)"
        counters.withLock { $0.problem = reason }
        guard failure != message else { return }
        failure = message
        logger.error("\(message)", metadata: ["error": "\(error)"])
    }

    private func append(_ lines: [[UInt8]]) async -> Result<Void, EventLogError> {
        let (outcome, rotations) = await onQueue { file in
            (Result { () throws(EventLogError) in try file.append(lines) }, file.rotations)
        }
        counters.withLock { counters in
            counters.rotations = Int64(rotations)
            if case .success = outcome { counters.written += Int64(lines.count) } else { counters.failedWrites += 1 }
        }
        return outcome
    }

    private func writeLiveEvents() async throws {
        while true {
            guard let current = subscription.withLock({ $0 }) else { return }
            do {
                let batch = try await current.nextBatch()
                if batch.isEmpty { return }
                if case .failure(let error) = await append(batch.map { $0.jsonBytes + [UInt8(ascii: "\n")] }) {
                    logger.error("the event log lost a batch", metadata: ["events": "\(batch.count)", "error": "\(error)"])
                }
            } catch {
                if Task.isShuttingDownGracefully || Task.isCancelled { return }
                counters.withLock { $0.overflows += 1 }
                logger.error("the event log fell behind (a slow disk?) and lost events; continuing with new ones", metadata: ["error": "\(error)"])
                subscription.withLock { $0 = broker.subscribe(capacity: error.capacity, kind: "eventlog") }
            }
        }
    }

    /// With `sync: interval`, lines written just before a lull still reach the disk in time.
    private func syncPeriodically() async {
        while !Task.isCancelled {
            let interval = await onQueue { $0.configuration.syncInterval }
            do {
                try await Task.sleep(for: interval)
            } catch {
                return
            }
            let outcome: Result<Void, EventLogError> = await onQueue { file in
                Result { () throws(EventLogError) in if file.configuration.sync == .interval { try file.syncIfDue() } }
            }
            if case .failure(let error) = outcome { logger.error("cannot sync the event log", metadata: ["error": "\(error)"]) }
        }
    }

    private func onQueue<Value: Sendable>(_ body: @escaping @Sendable (EventLogFile) -> Value) async -> Value {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: body(self.file.value)) }
        }
    }
}

/// The event log's file.
///
/// `@unchecked Sendable` because the invariant is kept by hand: it is used
/// only from the output's serial queue, never from two threads at once.
private final class QueueConfinedFile: @unchecked Sendable {
    let value: EventLogFile

    init(_ value: EventLogFile) {
        self.value = value
    }
}
