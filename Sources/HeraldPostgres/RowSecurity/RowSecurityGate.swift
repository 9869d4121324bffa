public import Herald
public import Logging
public import ServiceLifecycle
import Synchronization

/// Lets each row-level-security subscriber see exactly the changes its
/// database role and claims could select.
///
/// The gate reads the daemon's broker once, while any cohort exists. Each
/// cohort's batches are judged in order; cohorts at the same batch are
/// judged together, in one round trip (one catalog read, then one statement
/// per cohort and table), and each publishes what it may see on its own
/// broker: rows removed, columns removed, an UPDATE out of view turned into
/// its removal. A cohort whose rows are large or whose policy is slow is
/// judged alone, on another connection (``RowSecuritySchedule``).
public final class RowSecurityGate: Service, Sendable {
    /// Gate settings.
    public struct Configuration: Sendable {
        /// Events a cohort keeps for subscribers that resume. Default 10,000.
        public var historyCapacity: Int
        /// Events a cohort's subscriber may fall behind. Default 4096.
        public var mailboxCapacity: Int
        /// How long a cohort without subscribers is kept, so that a client
        /// that reconnects resumes from its history. Default 60 s.
        public var idleLifetime: Duration
        /// Connections that judge live batches: one for the cheap cohorts,
        /// the rest for expensive ones judged alone. At least 2. Default 2.
        public var checkConnections: Int

        public init(
            historyCapacity: Int = 10_000, mailboxCapacity: Int = 4096, idleLifetime: Duration = .seconds(60), checkConnections: Int = 2
        ) {
            self.historyCapacity = historyCapacity
            self.mailboxCapacity = mailboxCapacity
            self.idleLifetime = idleLifetime
            self.checkConnections = max(2, checkConnections)
        }
    }

    /// Events the gate, or one cohort's checks, may fall behind the daemon's broker before the streams end.
    static let feedCapacity = 65_536
    /// Row-image bytes one cohort's checks may fall behind before its streams end.
    static let backlogBytes = 64 << 20

    public let configuration: Configuration
    let broker: Broker
    /// Channel authorizations and column checks; the first of ``checkConnections``.
    var connection: SerialConnection { checkConnections[0] }
    /// Live batches' checks, as ``RowSecuritySchedule`` hands them out.
    let checkConnections: [SerialConnection]
    /// Replays' checks, on a connection of their own: a page of large rows, judged as one
    /// user, can take seconds, and everyone's live events waited behind it on one connection.
    let replayConnection: SerialConnection
    let logger: Logger
    let state: Mutex<State>
    let statistics = Mutex(RowSecurityStatistics())
    private let wakes: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation

    typealias Schedule = RowSecuritySchedule<UInt64, [Event]>

    struct State {
        var cohorts: [RowSecurityIdentity: RowSecurityCohort] = [:]
        /// The gate's subscription to the daemon's broker, while cohorts exist.
        var feed: Subscription?
        var feedIsRead = false
        var schedule: Schedule
        /// Per check connection, the scripts that failed in a row: how long it waits before the next.
        var connectionFailures: [Int]
        /// Overflows of the subscribers of cohorts that have ended, so that the count never goes back.
        var endedCohortsOverflows: UInt64 = 0
    }

    public init(configuration: Configuration = .init(), broker: Broker, database: ConnectionString, logger: Logger) {
        self.configuration = configuration
        self.broker = broker
        self.logger = logger
        checkConnections = (0..<configuration.checkConnections).map { index in
            SerialConnection(database, applicationName: index == 0 ? "pgherald row security" : "pgherald row security \(index + 1)")
        }
        replayConnection = SerialConnection(database, applicationName: "pgherald row security replays")
        state = Mutex(State(
            schedule: Schedule(configuration: .init(
                connections: configuration.checkConnections, backlogLimit: Self.feedCapacity, backlogBytes: Self.backlogBytes
            )),
            connectionFailures: Array(repeating: 0, count: configuration.checkConnections)
        ))
        (wakes, wake) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// The cohort of `identity`, made when it has none: subscribe to its broker.
    public func cohort(for identity: RowSecurityIdentity) -> RowSecurityCohort {
        let (cohort, isNew) = state.withLock { state -> (RowSecurityCohort, Bool) in
            if let existing = state.cohorts[identity] { return (existing, false) }
            let cohort = RowSecurityCohort(identity: identity, broker: Broker(configuration: .init(
                mailboxCapacity: configuration.mailboxCapacity, historyCapacity: configuration.historyCapacity,
                historyByteLimit: configuration.historyCapacity * 1024
            )))
            state.cohorts[identity] = cohort
            state.schedule.add(cohort.serial)
            // Subscribed before the cohort is handed out, so that nothing published after it is missed.
            if state.feed == nil {
                state.feed = broker.subscribe(Self.feedFilter, capacity: Self.feedCapacity, kind: "row-security")
            }
            return (cohort, true)
        }
        if isNew {
            logger.debug("row-security cohort started", metadata: ["identity": "\(identity)"])
            wake.yield()
        }
        return cohort
    }

    /// Row changes and database broadcasts: a cohort's subscribers filter broadcasts by their grant's topics.
    static let feedFilter = EventFilter(operations: OperationSet.all.union(.broadcast))

    /// The counters for `/stats` and `/metrics`.
    public var currentStatistics: RowSecurityStatistics {
        var current = statistics.withLock { $0 }
        current.cohorts = state.withLock { $0.cohorts.count }
        return current
    }

    /// Subscribers of cohorts, ended ones included, whose mailbox overflowed (`/stats` `overflows`).
    public var overflowCount: UInt64 {
        let (ended, cohorts) = state.withLock { ($0.endedCohortsOverflows, Array($0.cohorts.values)) }
        return cohorts.reduce(ended) { $0 + $1.broker.statistics.overflowCount }
    }

    /// The cohorts' subscribers now, by kind, which the daemon's broker does not count.
    public var subscribersByKind: [String: Int] {
        state.withLock { Array($0.cohorts.values) }.reduce(into: [:]) { kinds, cohort in
            kinds.merge(cohort.broker.statistics.subscribersByKind, uniquingKeysWith: +)
        }
    }

    /// Reads the feed while cohorts exist, runs each script the schedule
    /// hands out, and drops cohorts whose subscribers have gone.
    public func run() async {
        await withDiscardingTaskGroup { group in
            // On a clock of its own: a cohort left with no subscriber, and the feed that reads for it, are
            // dropped when their lifetime ends, not when the next event arrives, which may be never.
            group.addTask {
                await cancelWhenGracefulShutdown {
                    while (try? await Task.sleep(for: self.idleSweepInterval)) != nil { self.dropIdleCohorts() }
                }
            }
            await withGracefulShutdownHandler {
                for await _ in wakes {
                    if state.withLock({ state in
                        guard state.feed != nil, !state.feedIsRead else { return false }
                        state.feedIsRead = true
                        return true
                    }) {
                        group.addTask {
                            await self.consumeFeed()
                            self.state.withLock { $0.feedIsRead = false }
                            self.wake.yield()
                        }
                    }
                    while let job = state.withLock({ $0.schedule.next() }) {
                        group.addTask {
                            await self.execute(job)
                            self.wake.yield()
                        }
                    }
                }
            } onGracefulShutdown: {
                self.wake.finish()
            }
        }
    }

    /// Reads the daemon's broker until no cohort is left, or the broker ends.
    private func consumeFeed() async {
        while let feed = state.withLock({ $0.feed }) {
            let events: [Event]
            do {
                events = try await feed.nextBatch(limit: 4096)
            } catch {
                logger.warning("the row-security checks fell behind; their streams end and resume", metadata: ["capacity": "\(error.capacity)"])
                endAllCohorts("pgherald: the row-security checks fell \(error.capacity) events behind")
                return
            }
            guard !events.isEmpty else {
                for cohort in removeAllCohorts() { cohort.broker.shutdown() }
                return
            }
            queue(events)
        }
    }

    /// Hands `events` to every cohort's pipeline, in parts of at most a
    /// script's bytes, with the bytes of row images each part has in the
    /// tables a cohort follows: what marks a part as expensive for it.
    private func queue(_ events: [Event]) {
        var rest = events[...]
        while !rest.isEmpty {
            let part = rest.prefix(firstPart(of: rest))
            rest = rest.dropFirst(part.count)
            var bytesByTable: [TableName: Int] = [:]
            for event in part { bytesByTable[event.table, default: 0] += Self.imageBytes(of: event) }
            queue(Array(part), bytesByTable: bytesByTable)
        }
        wake.yield()
    }

    /// How many of `events`, from the first, one check judges: at most
    /// 4 MiB of row images, or the first event alone if it has more. A
    /// replay judges a page in such parts, each in a turn of its own.
    public func firstPart(of events: some Collection<Event>) -> Int {
        let limit = state.withLock { $0.schedule.configuration.bytesPerScript }
        var count = 0
        var bytes = 0
        for event in events {
            bytes += Self.imageBytes(of: event)
            if count > 0, bytes > limit { break }
            count += 1
        }
        return count
    }

    private static func imageBytes(of event: Event) -> Int {
        event.operation == .broadcast || event.rowDataOmitted ? 0 : (event.newJSON?.bytes.count ?? 0) + (event.oldJSON?.bytes.count ?? 0)
    }

    private func queue(_ events: [Event], bytesByTable: [TableName: Int]) {
        let cohorts = state.withLock { Array($0.cohorts.values) }
        var bytes: [UInt64: Int] = [:]
        for cohort in cohorts {
            bytes[cohort.serial] = bytesByTable.reduce(0) { sum, entry in
                cohort.broker.hasSubscribers(following: entry.key) ? sum + entry.value : sum
            }
        }
        let total = bytesByTable.values.reduce(0, +)
        let overflowed = state.withLock { state in
            state.schedule.arrived(events, events: events.count) { bytes[$0] ?? total }
        }
        for serial in overflowed {
            guard let cohort = cohorts.first(where: { $0.serial == serial }) else { continue }
            logger.warning("a row-security cohort's checks fell behind; its streams end and resume", metadata: [
                "identity": "\(cohort.identity)", "events": "\(Self.feedCapacity)", "bytes": "\(Self.backlogBytes)",
            ])
            removeCohort(cohort)
            cohort.fail("pgherald: the row-security checks fell behind by more than \(Self.feedCapacity) events or \(Self.backlogBytes >> 20) MiB of rows")
        }
    }

    /// Judges `job` and publishes what each cohort may see; after a
    /// failure, waits, and the batches wait for the next script, so that
    /// nothing is lost while the database cannot be reached.
    private func execute(_ job: Schedule.Job) async {
        let serials = Set(job.cohorts)
        let cohorts = state.withLock { $0.cohorts.values.filter { serials.contains($0.serial) } }
        let events = job.batches.count == 1 ? job.batches[0] : Array(job.batches.joined())
        do {
            let limits = state.withLock { $0.schedule.configuration }
            let outcome = try await judge(
                events, for: cohorts, cohortTimeout: job.isExpensive ? nil : limits.sharedCheckLimit, on: checkConnections[job.connection]
            )
            for (cohort, reason) in outcome.failures {
                logger.warning("a row-security cohort's check failed; its streams end", metadata: [
                    "identity": "\(cohort.identity)", "reason": "\(reason)",
                ])
                removeCohort(cohort)
                cohort.fail("pgherald: the row-level security check failed: \(reason)")
            }
            for (cohort, visible) in outcome.visible where !visible.isEmpty {
                cohort.broker.publish(visible)
            }
            let slow = Set(outcome.costs.filter { $0.value.time > limits.sharedCheckLimit.time(images: $0.value.images) }.keys)
            if job.isExpensive { statistics.withLock { $0.aloneBatches += UInt64(job.batches.count) } }
            state.withLock { state in
                state.connectionFailures[job.connection] = 0
                state.schedule.finished(job, slow: slow, overran: outcome.overran)
            }
        } catch {
            // A statement the server refuses outside any cohort (the catalog read) will not pass by waiting:
            // after three, the cohorts' streams end, and resume when their clients reconnect. A lost connection is waited out.
            let refused = (error as? LibpqError)?.code == .queryFailed
            let attempt = state.withLock { state in
                state.connectionFailures[job.connection] += 1
                return state.connectionFailures[job.connection]
            }
            logger.warning("row-security checks cannot run; retrying", metadata: ["attempt": "\(attempt)", "error": "\(error)"])
            let stopped = (try? await Task.sleep(for: .milliseconds(min(5_000, 100 * attempt)))) == nil
            let ended = state.withLock { $0.schedule.failed(job, refused: refused || stopped) }
            for cohort in cohorts where ended.contains(cohort.serial) || stopped {
                removeCohort(cohort)
                cohort.fail(stopped
                    ? "pgherald: stopped while row-security checks could not run"
                    : "pgherald: the row-level security checks failed: \((error as? LibpqError)?.message ?? "\(error)")")
            }
        }
    }

    /// What `identity` may see of `events`, for a stream that reads them
    /// from the journal or a history older than its cohort.
    /// - Throws: ``RowSecurityError`` when the check fails; the stream should end with its reason.
    public func visible(_ events: [Event], to identity: RowSecurityIdentity) async throws -> [Event] {
        let cohort = RowSecurityCohort(identity: identity, broker: Broker())
        let outcome = try await judge(events, for: [cohort], followingAll: true, on: replayConnection)
        if let (_, reason) = outcome.failures.first { throw RowSecurityError(reason: reason) }
        return outcome.visible.first?.1 ?? []
    }

    private func endAllCohorts(_ reason: String) {
        for cohort in removeAllCohorts() { cohort.fail(reason) }
    }

    private func removeAllCohorts() -> [RowSecurityCohort] {
        let removed = state.withLock { state in
            defer {
                for cohort in state.cohorts.values { state.schedule.remove(cohort.serial) }
                state.cohorts = [:]
                state.feed?.cancel()
                state.feed = nil
            }
            return Array(state.cohorts.values)
        }
        let overflows = removed.reduce(0) { $0 + $1.broker.statistics.overflowCount }
        state.withLock { $0.endedCohortsOverflows += overflows }
        return removed
    }

    private func removeCohort(_ cohort: RowSecurityCohort) {
        // Read before the gate's lock: a broker's lock is never taken inside it.
        let overflows = cohort.broker.statistics.overflowCount
        state.withLock { state in
            state.schedule.remove(cohort.serial)
            if state.cohorts[cohort.identity] === cohort {
                state.cohorts[cohort.identity] = nil
                state.endedCohortsOverflows += overflows
            }
            if state.cohorts.isEmpty {
                state.feed?.cancel()
                state.feed = nil
            }
        }
    }

    /// How often cohorts are checked for subscribers: a quarter of their
    /// lifetime, so one is dropped within 1.5 lifetimes of its last subscriber leaving.
    var idleSweepInterval: Duration { min(.seconds(15), max(.milliseconds(10), configuration.idleLifetime / 4)) }

    private func dropIdleCohorts() {
        let now = ContinuousClock.now
        let candidates = state.withLock { Array($0.cohorts.values) }
        for cohort in candidates where cohort.isIdle(for: configuration.idleLifetime, now: now) {
            removeCohort(cohort)
            cohort.broker.shutdown()
            logger.debug("row-security cohort ended: no subscriber", metadata: ["identity": "\(cohort.identity)"])
        }
    }
}

/// Why a row-level-security check could not decide what a subscriber sees.
public struct RowSecurityError: Error, Sendable, CustomStringConvertible {
    public var reason: String
    public var description: String { reason }
}
