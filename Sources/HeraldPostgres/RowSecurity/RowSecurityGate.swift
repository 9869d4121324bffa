public import Herald
public import Logging
public import ServiceLifecycle
import Synchronization

/// Lets each row-level-security subscriber see exactly the changes its
/// database role and claims could select.
///
/// The gate reads the daemon's broker once, while any cohort exists. For
/// each batch it takes, it reads the roles' privileges and policies, then
/// judges the batch's row images for every cohort that follows their tables
/// in one round trip (one statement per cohort and table), and publishes
/// what each cohort may see on that cohort's broker: rows removed, columns
/// removed, an UPDATE out of view turned into its removal.
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

        public init(historyCapacity: Int = 10_000, mailboxCapacity: Int = 4096, idleLifetime: Duration = .seconds(60)) {
            self.historyCapacity = historyCapacity
            self.mailboxCapacity = mailboxCapacity
            self.idleLifetime = idleLifetime
        }
    }

    /// Events the gate may fall behind the daemon's broker before its cohorts' streams end.
    static let feedCapacity = 65_536

    public let configuration: Configuration
    let broker: Broker
    /// Live batches' checks and channel authorizations.
    let connection: SerialConnection
    /// Replays' checks, on a connection of their own: a page of large rows, judged as one
    /// user, can take seconds, and everyone's live events waited behind it on one connection.
    let replayConnection: SerialConnection
    let logger: Logger
    let state = Mutex(State())
    let statistics = Mutex(RowSecurityStatistics())
    private let wakes: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation

    struct State {
        var cohorts: [RowSecurityIdentity: RowSecurityCohort] = [:]
        /// The gate's subscription to the daemon's broker, while cohorts exist.
        var feed: Subscription?
    }

    public init(configuration: Configuration = .init(), broker: Broker, database: ConnectionString, logger: Logger) {
        self.configuration = configuration
        self.broker = broker
        self.logger = logger
        connection = SerialConnection(database, applicationName: "pgherald row security")
        replayConnection = SerialConnection(database, applicationName: "pgherald row security replays")
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

    /// The cohorts' subscribers now, by kind, which the daemon's broker does not count.
    public var subscribersByKind: [String: Int] {
        state.withLock { Array($0.cohorts.values) }.reduce(into: [:]) { kinds, cohort in
            kinds.merge(cohort.broker.statistics.subscribersByKind, uniquingKeysWith: +)
        }
    }

    public func run() async {
        await withGracefulShutdownHandler {
            for await _ in wakes {
                await consumeFeed()
            }
        } onGracefulShutdown: {
            self.wake.finish()
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
            await deliver(events)
            dropIdleCohorts()
        }
    }

    /// Publishes what each cohort may see of `events`; waits while the
    /// database cannot be reached, so that nothing is lost.
    private func deliver(_ events: [Event]) async {
        let cohorts = state.withLock { Array($0.cohorts.values) }
        var attempt = 0
        while true {
            do {
                let outcome = try await judge(events, for: cohorts, on: connection)
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
                return
            } catch {
                attempt += 1
                // A statement the server refuses outside any cohort (the catalog read) will not pass by waiting:
                // the streams end, and resume when their clients reconnect. A lost connection is waited out.
                if let failure = error as? LibpqError, failure.code == .queryFailed, attempt >= 3 {
                    logger.error("row-security checks keep failing; their streams end", metadata: ["error": "\(failure)"])
                    endAllCohorts("pgherald: the row-level security checks failed: \(failure.message)")
                    return
                }
                logger.warning("row-security checks cannot run; retrying", metadata: ["attempt": "\(attempt)", "error": "\(error)"])
                do {
                    try await Task.sleep(for: .milliseconds(min(5_000, 100 * attempt)))
                } catch {
                    endAllCohorts("pgherald: stopped while row-security checks could not run")
                    return
                }
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
        state.withLock { state in
            defer {
                state.cohorts = [:]
                state.feed?.cancel()
                state.feed = nil
            }
            return Array(state.cohorts.values)
        }
    }

    private func removeCohort(_ cohort: RowSecurityCohort) {
        state.withLock { state in
            if state.cohorts[cohort.identity] === cohort { state.cohorts[cohort.identity] = nil }
            if state.cohorts.isEmpty {
                state.feed?.cancel()
                state.feed = nil
            }
        }
    }

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
