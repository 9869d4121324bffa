import Herald
import Logging

extension LiveQueryEngine {
    /// One query with one set of parameter values: what is evaluated once for all its subscribers.
    struct EvaluationKey: Hashable, Sendable {
        var name: String
        var values: [String]
        /// For a query that runs as its subscriber: whose role and claims; one evaluation per cohort.
        var identity: RowSecurityIdentity?
    }

    typealias Continuation = AsyncThrowingStream<LiveQueryStep, any Error>.Continuation

    struct Evaluation {
        var scheduler: LiveQueryScheduler
        var tables: [TableName]
        /// Random per evaluation: resume tokens from another are not taken for this one's.
        let generation: String
        /// Recent results, oldest first, for subscribers that resume; the last is the current one.
        var held: [LiveQueryResult] = []
        var latest: LiveQueryResult? { held.last }
        var subscribers: [UInt64: Continuation] = [:]
        /// Subscribers that joined while an evaluation was due and have no result yet.
        var awaitingFirst: Set<UInt64> = []

        /// A change to one of its tables; nothing while no one subscribes
        /// (a returning subscriber gets a fresh evaluation anyway).
        mutating func changeArrived(transactionID: UInt64?, at now: ContinuousClock.Instant) -> LiveQueryScheduler.Action {
            subscribers.isEmpty ? .none : scheduler.changeArrived(transactionID: transactionID, at: now)
        }
    }

    struct State {
        /// The tables each query reads, once inspected.
        var inspections: [String: [TableName]] = [:]
        var evaluations: [EvaluationKey: Evaluation] = [:]
        var byTable: [TableName: Set<EvaluationKey>] = [:]
        var nextSubscriberID: UInt64 = 0
        var evaluationCounts: [String: UInt64] = [:]
        var lastFailures: [String: String] = [:]
        /// Subscribers of a failed query, to be ended once the lock is let go:
        /// ending one calls back into the engine.
        var ended: [(Continuation, LiveQueryError)] = []

        /// Adds a subscriber. It gets the current result at once when there
        /// is one that is being kept current; otherwise the evaluation this starts.
        /// - Returns: its id, the held result `token` names, and what to do.
        mutating func subscribe(
            _ key: EvaluationKey, tables: [TableName], continuation: Continuation, token: String?, configuration: Configuration
        ) -> (UInt64, LiveQueryResult?, LiveQueryScheduler.Action) {
            let id = nextSubscriberID
            nextSubscriberID += 1
            var evaluation = evaluations[key] ?? {
                for table in tables { byTable[table, default: []].insert(key) }
                return Evaluation(
                    scheduler: LiveQueryScheduler(configuration: configuration.coalescing), tables: tables,
                    generation: String(UInt32.random(in: .min ... .max), radix: 16)
                )
            }()
            defer { evaluations[key] = evaluation }
            let resumed = token.flatMap { token in evaluation.held.last { $0.token == token } }
            let keptCurrent = !evaluation.subscribers.isEmpty
            evaluation.subscribers[id] = continuation
            if keptCurrent, let latest = evaluation.latest, !evaluation.scheduler.isEvaluating {
                continuation.yield(LiveQueryStep(result: latest, differenceFromPrevious: nil, transactionID: evaluation.scheduler.newestIncluded))
                return (id, resumed, .none)
            }
            evaluation.awaitingFirst.insert(id)
            return (id, resumed, keptCurrent ? .none : evaluation.scheduler.start())
        }

        /// - Returns: whether the evaluation has no subscriber left, and should linger.
        mutating func unsubscribe(_ id: UInt64, from key: EvaluationKey) -> Bool {
            guard evaluations[key]?.subscribers.removeValue(forKey: id) != nil else { return false }
            evaluations[key]?.awaitingFirst.remove(id)
            return evaluations[key]?.subscribers.isEmpty == true
        }

        mutating func dropIfUnused(_ key: EvaluationKey) {
            guard let evaluation = evaluations[key], evaluation.subscribers.isEmpty else { return }
            evaluations[key] = nil
            for table in evaluation.tables { byTable[table]?.remove(key) }
        }

        /// Takes an evaluation's outcome: hands a changed result to every
        /// subscriber, ends them when the query itself failed, or retries
        /// when the database could not be reached.
        mutating func finish(
            _ key: EvaluationKey, _ outcome: Result<(snapshot: TransactionSnapshot, rows: [RawJSON]), LibpqError>,
            definition: LiveQueryDefinition, now: ContinuousClock.Instant, configuration: Configuration, logger: Logger
        ) -> LiveQueryScheduler.Action {
            guard var evaluation = evaluations[key] else { return .none }
            defer { if evaluations[key] != nil { evaluations[key] = evaluation } }
            let read: (snapshot: TransactionSnapshot, rows: [RawJSON])
            switch outcome {
            case .success(let success):
                read = success
            case .failure(let error) where error.code != .queryFailed:
                lastFailures[key.name] = error.message
                logger.warning("a live query cannot reach the database; it runs again shortly", metadata: [
                    "query": "\(key.name)", "reason": "\(error.message)",
                ])
                return evaluation.scheduler.failed(at: now, retryAt: now + configuration.retryDelay)
            case .failure(let error) where evaluation.latest == nil && !definition.parameters.isEmpty && error.sqlState?.hasPrefix("22") == true:
                // A data exception before any result: the subscriber's values (`id=x` for an int), not the query, are wrong.
                end(key, &evaluation, LiveQueryError(
                    .badParameters, "query \(key.name) refuses these parameter values: \(error.message)"
                ), logger: logger, byTheSubscriber: true)
                return .none
            case .failure(let error):
                end(key, &evaluation, LiveQueryError(.queryFailed, "query \(key.name) failed: \(error.message)"), logger: logger)
                return .none
            }
            let result: LiveQueryResult
            do {
                result = try LiveQueryResult(
                    query: key.name, version: (evaluation.latest?.version ?? 0) + 1, generation: evaluation.generation,
                    snapshot: read.snapshot, rows: read.rows, keyColumns: definition.key
                )
            } catch {
                end(key, &evaluation, error, logger: logger)
                return .none
            }
            lastFailures[key.name] = nil
            let action = evaluation.scheduler.evaluated(snapshot: read.snapshot, at: now)
            let transactionID = evaluation.scheduler.newestIncluded
            let difference = evaluation.latest.map { result.difference(from: $0) }
            if difference?.isEmpty == true {
                // The same rows, now known as of a newer snapshot: those still waiting get them, and nobody else hears of it.
                evaluation.held[evaluation.held.count - 1].snapshot = read.snapshot
                let latest = evaluation.held[evaluation.held.count - 1]
                for id in evaluation.awaitingFirst {
                    evaluation.subscribers[id]?.yield(LiveQueryStep(result: latest, differenceFromPrevious: nil, transactionID: transactionID))
                }
                evaluation.awaitingFirst.removeAll()
                return action
            }
            evaluation.held.append(result)
            let kept = max(configuration.history, 1)
            if evaluation.held.count > kept { evaluation.held.removeFirst(evaluation.held.count - kept) }
            let step = LiveQueryStep(result: result, differenceFromPrevious: difference, transactionID: transactionID)
            for continuation in evaluation.subscribers.values { continuation.yield(step) }
            evaluation.awaitingFirst.removeAll()
            return action
        }

        /// - Parameter byTheSubscriber: the subscriber's parameters failed it, not the query: no error of the
        ///   query's for the log and `/stats`, which a client could otherwise write at will.
        private mutating func end(
            _ key: EvaluationKey, _ evaluation: inout Evaluation, _ error: LiveQueryError, logger: Logger, byTheSubscriber: Bool = false
        ) {
            if byTheSubscriber {
                logger.notice("refused a live query's parameters", metadata: ["query": "\(key.name)", "reason": "\(error.message)"])
            } else {
                lastFailures[key.name] = error.message
                logger.error("a live query failed; its subscribers are told and it is dropped", metadata: [
                    "query": "\(key.name)", "reason": "\(error.message)",
                ])
            }
            let subscribers = evaluation.subscribers.values
            evaluation.subscribers.removeAll()
            evaluations[key] = nil
            for table in evaluation.tables { byTable[table]?.remove(key) }
            ended += subscribers.map { ($0, error) }
        }
    }
}
