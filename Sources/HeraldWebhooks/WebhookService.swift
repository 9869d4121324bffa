public import Herald
import HeraldOutput
public import HeraldPostgres
public import Logging
public import ServiceLifecycle
import Synchronization

/// Webhook delivery: feeds pending deliveries into the database and runs one
/// ``WebhookDispatcher`` per endpoint.
///
/// Durable mode feeds from the journal (see ``WebhookStore/feedFromJournal(_:pageSize:)``),
/// woken by the broker's events, so nothing committed is missed even while
/// no daemon runs. Notify-only mode has no journal: it queues the events the
/// broker delivers, and events committed while no daemon listens are not sent.
public final class WebhookService: Service, Sendable {
    /// How often the backlog in the database is measured for `/stats` and `/metrics`.
    static let measureInterval: Duration = .seconds(2)

    let store: WebhookStore
    let broker: Broker
    let health: SourceHealth
    let version: String
    let logger: Logger
    /// Checks each endpoint's filter at start and on reload; nil: not checked.
    let catalog: SchemaCatalog?
    let state: Mutex<State>
    let feedDoorbell = Doorbell()
    /// Answered once the endpoints at start have their feeds: from then on, what commits reaches them.
    let started = OneShotFlag()

    struct State {
        var endpoints: [WebhookEndpoint]
        var dispatchers: [String: (dispatcher: WebhookDispatcher, task: Task<Void, Never>)] = [:]
        var backlogs: [String: WebhookStore.Backlog] = [:]
        var running = false
        /// The tables are checked and this name's old leases released, once there is an endpoint.
        var prepared = false
        var warnedUnchecked = false
    }

    public init(
        endpoints: [WebhookEndpoint], store: WebhookStore, broker: Broker, health: SourceHealth, catalog: SchemaCatalog?,
        version: String, logger: Logger
    ) {
        self.catalog = catalog
        self.store = store
        self.broker = broker
        self.health = health
        self.version = version
        self.logger = logger
        state = Mutex(State(endpoints: endpoints))
    }

    public var endpoints: [WebhookEndpoint] { state.withLock { $0.endpoints } }

    public func run() async throws {
        defer { started.set(false) }
        guard await health.waitUntilConnected() else {
            try? await gracefulShutdown()
            return
        }
        do {
            try await apply(endpoints)
            started.set(true)
        } catch {
            logger.error("webhooks cannot start", metadata: ["error": "\(error)"])
            throw error
        }
        let durable = health.durability != .notifyOnly
        await withDiscardingTaskGroup { group in
            group.addTask { await cancelWhenGracefulShutdown { await self.measureBacklog() } }
            if durable {
                group.addTask { await cancelWhenGracefulShutdown { await self.ringOnEvents() } }
                group.addTask { await cancelWhenGracefulShutdown { await self.feedFromJournal() } }
                group.addTask { await cancelWhenGracefulShutdown { await self.requeueAbandoned() } }
            } else {
                group.addTask { await cancelWhenGracefulShutdown { await self.queueLiveEvents() } }
            }
            try? await gracefulShutdown()
            // In-flight requests get up to their timeout; what is not confirmed stays pending.
            let running = state.withLock { state in
                state.running = false
                return state.dispatchers.values.map { $0 }
            }
            for entry in running { entry.dispatcher.stop() }
            for entry in running { await entry.task.value }
        }
    }

    /// Applies a changed `webhooks:` list: new endpoints start (fed from now
    /// on), removed ones stop (their pending rows stay for when they return),
    /// changed ones restart with the new settings. Pending work is kept throughout.
    public func reload(endpoints: [WebhookEndpoint]) async throws {
        try await checkFilters(endpoints)
        let before = state.withLock { state in
            defer { state.endpoints = endpoints }
            return state.endpoints
        }
        // Before the first start, run() applies the list itself.
        guard state.withLock({ $0.running }) else { return }
        do {
            try await apply(endpoints)
        } catch {
            state.withLock { $0.endpoints = before }
            throw error
        }
    }

    /// Refuses endpoints whose filter can never match: their events would go nowhere, silently.
    private func checkFilters(_ endpoints: [WebhookEndpoint]) async throws {
        guard let catalog else { return }
        if let problem = try await Self.filterProblem(in: endpoints, catalog: catalog) { throw problem }
    }

    private func apply(_ endpoints: [WebhookEndpoint]) async throws {
        try await checkFilters(endpoints)
        if !endpoints.isEmpty, !state.withLock({ $0.prepared }) {
            try await store.checkInstalled()
            let released = try await store.releaseLeases()
                + store.requeueInFlight(own: true, endpoints: endpoints.map(\.name)).values.reduce(0, +)
            if released > 0 {
                logger.info("deliveries in flight when this daemon last stopped are due again", metadata: ["deliveries": "\(released)"])
            }
            state.withLock { $0.prepared = true }
        }
        if !endpoints.isEmpty {
            let claims = try await store.startFeeds(endpoints)
            for (endpoint, before) in claims.redefined {
                logger.notice("webhook endpoint redefined: its feed takes the new definition from now on", metadata: [
                    "endpoint": "\(endpoint)", "before": "\(before)",
                ])
            }
            if claims.unchecked, !state.withLock({ $0.warnedUnchecked }) {
                state.withLock { $0.warnedUnchecked = true }
                logger.warning("the database cannot record webhook definitions, so daemons sharing it cannot check that theirs agree; run `pgherald install` to add them")
            }
        }
        let wanted = Dictionary(endpoints.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let stopped = state.withLock { state -> [(dispatcher: WebhookDispatcher, task: Task<Void, Never>)] in
            state.running = true
            var stopped: [(dispatcher: WebhookDispatcher, task: Task<Void, Never>)] = []
            for (name, entry) in state.dispatchers where wanted[name] != entry.dispatcher.endpoint {
                stopped.append(entry)
                state.dispatchers[name] = nil
            }
            return stopped
        }
        for entry in stopped {
            entry.dispatcher.stop()
            await entry.task.value
            logger.info("webhook endpoint stopped", metadata: ["endpoint": "\(entry.dispatcher.endpoint.name)"])
        }
        for endpoint in endpoints {
            let started = state.withLock { state -> Bool in
                guard state.dispatchers[endpoint.name] == nil else { return false }
                let dispatcher = WebhookDispatcher(endpoint: endpoint, store: store, feedDoorbell: feedDoorbell, version: version, logger: logger)
                state.dispatchers[endpoint.name] = (dispatcher, Task { await dispatcher.run() })
                return true
            }
            if started {
                logger.info("webhook endpoint started", metadata: [
                    "endpoint": "\(endpoint.name)", "url": "\(endpoint.url)",
                    "concurrency": "\(endpoint.effectiveConcurrency)", "ordered": "\(endpoint.ordered)",
                ])
            }
        }
        feedDoorbell.ring()
    }

    /// This daemon's figures per endpoint, with the backlog as last measured.
    public var statistics: [String: DaemonStatistics.Webhook] {
        state.withLock { state in
            var all: [String: DaemonStatistics.Webhook] = [:]
            for endpoint in state.endpoints {
                var figures = state.dispatchers[endpoint.name]?.dispatcher.statistics ?? DaemonStatistics.Webhook()
                let backlog = state.backlogs[endpoint.name] ?? WebhookStore.Backlog()
                figures.backlog = backlog.pending
                figures.oldestPendingSeconds = backlog.oldestPendingSeconds
                figures.nextRetryAt = backlog.nextRetryAt
                figures.dead = backlog.dead
                all[endpoint.name] = figures
            }
            return all
        }
    }

    /// Waits, a second at a time, until there is an endpoint to work for.
    func waitForEndpoints() async {
        while endpoints.isEmpty, !Task.isCancelled {
            await feedDoorbell.wait(timeout: Self.feedInterval)
        }
    }

    func wakeDispatchers(_ names: Set<String>) {
        let dispatchers = state.withLock { state in names.compactMap { state.dispatchers[$0]?.dispatcher } }
        for dispatcher in dispatchers { dispatcher.wake() }
    }

    private func measureBacklog() async {
        while !Task.isCancelled {
            if !endpoints.isEmpty, let backlogs = try? await store.backlogs() {
                state.withLock { $0.backlogs = backlogs }
            }
            try? await Task.sleep(for: Self.measureInterval)
        }
    }
}
