public import Herald
public import Logging
public import ServiceLifecycle
import Synchronization

/// Keeps the results of live queries current for their subscribers: the
/// seed apps' "run the query again when changeCount moves", done once per
/// burst of changes for everyone who shares the query and its parameters.
///
/// Run it as a `Service` beside the broker it follows; then ``subscribe(_:parameters:resumingAfter:)``.
/// Each distinct set of parameter values is one evaluation, scheduled by a
/// ``LiveQueryScheduler``, read in one REPEATABLE READ snapshot on the
/// engine's own connection.
public final class LiveQueryEngine: Service, Sendable {
    /// Timing and memory of the evaluations, with documented defaults.
    public struct Configuration: Sendable, Hashable {
        /// How changes are coalesced into one evaluation. Default: 20 ms
        /// without changes, or 50 ms after the first while they keep coming:
        /// at most about 20 evaluations a second for each set of parameter
        /// values, however many subscribers share it, and a result at most
        /// about 50 ms plus the query's own time behind a commit.
        public var coalescing: RefreshCoalescer.Configuration
        /// Results kept per evaluation for subscribers that resume (at least the current one). Default 16.
        public var history: Int
        /// How long an evaluation without subscribers keeps its results for
        /// a subscriber that comes back. Default 30 s.
        public var linger: Duration
        /// The wait before a query that could not reach the database runs again. Default 1 s.
        public var retryDelay: Duration
        /// How often subscribers of a result that has not changed hear that
        /// it is still current, so that their streams never look dead. Default 15 s.
        public var heartbeatInterval: Duration

        public init(
            coalescing: RefreshCoalescer.Configuration = .init(quietPeriod: .milliseconds(20), maximumDelay: .milliseconds(50)), history: Int = 16, linger: Duration = .seconds(30),
            retryDelay: Duration = .seconds(1), heartbeatInterval: Duration = .seconds(15)
        ) {
            self.coalescing = coalescing
            self.history = history
            self.linger = linger
            self.retryDelay = retryDelay
            self.heartbeatInterval = heartbeatInterval
        }
    }

    public let definitions: [String: LiveQueryDefinition]
    let configuration: Configuration
    let broker: Broker
    let connection: SerialConnection
    let logger: Logger
    let state = Mutex(State())

    public init(
        definitions: [LiveQueryDefinition], configuration: Configuration = .init(), broker: Broker, database: ConnectionString,
        logger: Logger
    ) {
        self.definitions = Dictionary(definitions.map { ($0.name, $0) }, uniquingKeysWith: { _, last in last })
        self.configuration = configuration
        self.broker = broker
        connection = SerialConnection(database, applicationName: "pgherald live queries")
        self.logger = logger
    }

    /// Follows the broker until cancelled or the graceful shutdown, then ends every subscription.
    public func run() async throws {
        let heartbeats = Task { [weak self, configuration] in
            while !Task.isCancelled {
                try? await Task.sleep(for: configuration.heartbeatInterval)
                self?.sendHeartbeats()
            }
        }
        defer { heartbeats.cancel() }
        await cancelWhenGracefulShutdown {
            var subscription = self.broker.subscribe(.all, kind: "live-queries")
            while !Task.isCancelled {
                do {
                    let batch = try await subscription.nextBatch()
                    if batch.isEmpty { break }
                    self.changes(batch)
                } catch {
                    // Fell behind: what was dropped is unknown, so every query runs again.
                    self.logger.warning("live queries fell behind the broker; every query runs again")
                    subscription = self.broker.subscribe(.all, kind: "live-queries")
                    self.changeOfUnknownTransaction()
                }
            }
        }
        endAll(LiveQueryError(.unavailable, "the daemon is shutting down"))
    }

    /// The tables `name` reads, which a caller's access rules must grant.
    /// - Throws: the query is unknown, or does not pass ``LiveQueryRunner/inspect(_:on:)``.
    public func tables(of name: String) async throws(LiveQueryError) -> [TableName] {
        let definition = try definition(named: name)
        if let known = state.withLock({ $0.inspections[name] }) { return known }
        do {
            let inspection = try await connection.run { connection throws(LibpqError) in
                try LiveQueryRunner.inspect(definition, on: connection)
            }
            state.withLock { $0.inspections[name] = inspection.tables }
            return inspection.tables
        } catch {
            throw error.code == .queryFailed
                ? LiveQueryError(.queryFailed, error.message)
                : LiveQueryError(.unavailable, "cannot reach the database for query \(name): \(error.message)")
        }
    }

    /// Subscribes to the query `name` with the values of its parameters.
    ///
    /// The first update holds the whole result, or, resuming from a result
    /// this engine still holds, what changed since that one.
    /// - Parameter token: a ``LiveQueryResult/token`` this subscriber last had.
    /// - Parameter identity: the subscriber's row-level security, for a
    ///   query that runs as its subscriber (``LiveQueryDefinition/runsAsSubscriber``);
    ///   subscribers with equal identities share one evaluation. Nil, or a
    ///   query that runs as the daemon: pgherald's own role.
    public func subscribe(
        _ name: String, parameters: [String: String] = [:], resumingAfter token: String? = nil, as identity: RowSecurityIdentity? = nil
    ) async throws(LiveQueryError) -> LiveQuerySubscription {
        let tables = try await tables(of: name)
        let definition = try definition(named: name)
        let values = try definition.boundValues(parameters)
        let key = EvaluationKey(name: name, values: values, identity: definition.runsAsSubscriber ? identity : nil)
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: LiveQueryStep.self, bufferingPolicy: .bufferingNewest(1))
        let (subscriberID, resumedFrom, action) = state.withLock { state in
            state.subscribe(key, tables: tables, continuation: continuation, token: token, configuration: configuration)
        }
        let subscription = LiveQuerySubscription(stream: stream, continuation: continuation, resumedFrom: resumedFrom)
        continuation.onTermination = { [weak self] _ in self?.unsubscribe(subscriberID, from: key) }
        perform(action, for: key)
        return subscription
    }

    private func definition(named name: String) throws(LiveQueryError) -> LiveQueryDefinition {
        guard let definition = definitions[name] else {
            throw LiveQueryError(.unknownQuery, "no live query is named \(name) (configured: \(definitions.keys.sorted().joined(separator: ", ")))")
        }
        return definition
    }

    /// Figures per query, for `/stats`.
    public var statistics: [String: LiveQueryStatistics] {
        state.withLock { state in
            var all = Dictionary(uniqueKeysWithValues: definitions.keys.map { ($0, LiveQueryStatistics()) })
            for (key, evaluation) in state.evaluations {
                all[key.name]?.parameterSets += 1
                all[key.name]?.subscribers += evaluation.subscribers.count
                let version = max(all[key.name]?.version ?? 0, evaluation.latest?.version ?? 0)
                all[key.name]?.version = version
            }
            for (name, count) in state.evaluationCounts { all[name]?.evaluations = count }
            for (name, failure) in state.lastFailures { all[name]?.lastError = failure }
            return all
        }
    }

    private func sendHeartbeats() {
        state.withLock { state in
            for evaluation in state.evaluations.values {
                guard let latest = evaluation.latest else { continue }
                let step = LiveQueryStep(result: latest, differenceFromPrevious: nil, transactionID: evaluation.scheduler.newestIncluded, isHeartbeat: true)
                for (id, continuation) in evaluation.subscribers where !evaluation.awaitingFirst.contains(id) { continuation.yield(step) }
            }
        }
    }

    private func unsubscribe(_ subscriberID: UInt64, from key: EvaluationKey) {
        let linger = state.withLock { $0.unsubscribe(subscriberID, from: key) }
        guard linger else { return }
        Task { [weak self, configuration] in
            try? await Task.sleep(for: configuration.linger)
            self?.state.withLock { $0.dropIfUnused(key) }
        }
    }

    private func changes(_ events: [Event]) {
        let now = ContinuousClock.now
        let actions = state.withLock { state in
            var actions: [(EvaluationKey, LiveQueryScheduler.Action)] = []
            for event in events where event.operation != .broadcast {
                guard let keys = state.byTable[event.table] else { continue }
                let transactionID = UInt64(event.transactionID)
                for key in keys {
                    guard let action = state.evaluations[key]?.changeArrived(transactionID: transactionID, at: now), action != .none else { continue }
                    actions.append((key, action))
                }
            }
            return actions
        }
        for (key, action) in actions { perform(action, for: key) }
    }

    private func changeOfUnknownTransaction() {
        let now = ContinuousClock.now
        let actions = state.withLock { state in
            state.evaluations.keys.map { key in (key, state.evaluations[key]?.changeArrived(transactionID: nil, at: now) ?? .none) }
        }
        for (key, action) in actions { perform(action, for: key) }
    }

    func perform(_ action: LiveQueryScheduler.Action, for key: EvaluationKey) {
        switch action {
        case .none:
            break
        case .startTimer(let deadline):
            Task { [weak self] in
                try? await Task.sleep(until: deadline, clock: .continuous)
                guard let self else { return }
                let next = self.state.withLock { $0.evaluations[key]?.scheduler.timerFired(at: .now) } ?? .none
                self.perform(next, for: key)
            }
        case .evaluate:
            Task { [weak self] in await self?.evaluate(key) }
        case .retry(let instant):
            Task { [weak self] in
                try? await Task.sleep(until: instant, clock: .continuous)
                guard let self else { return }
                let next = self.state.withLock { $0.evaluations[key]?.scheduler.retryDue() } ?? .none
                self.perform(next, for: key)
            }
        }
    }

    private func evaluate(_ key: EvaluationKey) async {
        guard let definition = definitions[key.name] else { return }
        let outcome: Result<(snapshot: TransactionSnapshot, rows: [RawJSON]), LibpqError>
        do {
            outcome = .success(try await connection.run { connection throws(LibpqError) in
                try LiveQueryRunner.evaluate(definition, parameters: key.values, as: key.identity, on: connection)
            })
        } catch {
            outcome = .failure(error)
        }
        let now = ContinuousClock.now
        let (next, ended) = state.withLock { state in
            state.evaluationCounts[key.name, default: 0] += 1
            let next = state.finish(key, outcome, definition: definition, now: now, configuration: configuration, logger: logger)
            defer { state.ended.removeAll() }
            return (next, state.ended)
        }
        for (continuation, error) in ended { continuation.finish(throwing: error) }
        perform(next, for: key)
    }

    private func endAll(_ error: LiveQueryError) {
        let continuations = state.withLock { state in
            defer { state.evaluations.removeAll(); state.byTable.removeAll() }
            return state.evaluations.values.flatMap { $0.subscribers.values }
        }
        for continuation in continuations { continuation.finish(throwing: error) }
    }
}
