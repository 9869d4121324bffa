import Dispatch
public import Herald
public import Logging
public import ServiceLifecycle
import Synchronization

/// Appends every event to the event log as one JSON line, in delivery order.
///
/// It is a broker subscriber like the others: the listener never waits for
/// it. Writes happen on a queue of its own, so a slow disk stalls only the
/// log; if the log falls ``EventLogConfiguration/buffer`` events behind, it
/// loses those events, says how many it knows of, and carries on with new ones.
/// A failed write (a full disk) drops that batch, cut back to a whole line,
/// and is logged; writing resumes when the disk has room.
public final class EventLogOutput: Service, Sendable {
    /// What the log has done, for `/stats` and `/metrics`.
    public struct Statistics: Sendable, Hashable {
        public var written: Int64
        public var failedWrites: Int64
        public var overflows: Int64
        public var rotations: Int64
    }

    let broker: Broker
    let logger: Logger
    /// Replaced after an overflow; graceful shutdown cancels whichever is current.
    let subscription: Mutex<Subscription>
    private let queue = DispatchQueue(label: "pgherald.eventlog")
    private let file: QueueConfinedFile
    private let counters = Mutex(Statistics(written: 0, failedWrites: 0, overflows: 0, rotations: 0))

    /// Opens (or creates) the file and subscribes, so it sees every event published from now on.
    public init(configuration: EventLogConfiguration, broker: Broker, logger: Logger) throws(EventLogError) {
        self.broker = broker
        self.logger = logger
        file = QueueConfinedFile(try EventLogFile(configuration: configuration))
        subscription = Mutex(broker.subscribe(capacity: configuration.buffer, kind: "eventlog"))
    }

    public var statistics: Statistics { counters.withLock { $0 } }

    public func run() async throws {
        try await withGracefulShutdownHandler {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await self.writeEvents() }
                group.addTask { await self.syncPeriodically() }
                try await group.next()
                group.cancelAll()
            }
            await onQueue { file in try? file.sync() }
        } onGracefulShutdown: {
            self.subscription.withLock { $0 }.cancel()
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
        while true {
            do {
                let batch = try await subscription.withLock { $0 }.nextBatch()
                if batch.isEmpty { return }
                let lines = batch.map { $0.jsonBytes + [UInt8(ascii: "\n")] }
                let (outcome, rotations) = await onQueue { file in
                    (Result { () throws(EventLogError) in try file.append(lines) }, file.rotations)
                }
                counters.withLock { counters in
                    counters.rotations = Int64(rotations)
                    if case .success = outcome { counters.written += Int64(batch.count) } else { counters.failedWrites += 1 }
                }
                if case .failure(let error) = outcome {
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
