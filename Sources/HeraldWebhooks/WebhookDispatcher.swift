import Herald
import Logging
import Metrics
import Synchronization

/// Delivers one endpoint's pending events: leases due rows, sends them with up
/// to `concurrency` requests in flight, and writes the outcomes back in batches.
///
/// It runs on its own tasks and its own HTTP connection pool, and waits only
/// on the database and its own receiver, so a hanging endpoint delays nothing else.
final class WebhookDispatcher: Sendable {
    /// Time between looks for due rows that no doorbell announces: retries
    /// from other daemons and leases that ran out.
    static let pollInterval: Duration = .seconds(1)

    let endpoint: WebhookEndpoint
    private let store: WebhookStore
    private let sender: WebhookSender
    private let schedule: RetrySchedule
    private let doorbell = Doorbell()
    private let logger: Logger
    private let latency: Metrics.Timer
    private let state: Mutex<State>

    private struct State {
        var gate: EndpointGate
        var inFlight = 0
        var completions: [CompletedDelivery] = []
        /// The earliest retry this daemon scheduled and has not yet looked for.
        var nextRetry: ContinuousClock.Instant?
        var stopping = false
        var counters = DaemonStatistics.Webhook()
    }

    init(endpoint: WebhookEndpoint, store: WebhookStore, version: String, schedule: RetrySchedule = .init(), logger: Logger) {
        self.endpoint = endpoint
        self.store = store
        self.schedule = schedule
        sender = WebhookSender(endpoint: endpoint, version: version)
        var logger = logger
        logger[metadataKey: "endpoint"] = "\(endpoint.name)"
        self.logger = logger
        latency = Metrics.Timer(label: "pgherald_webhook_latency_seconds", dimensions: [("endpoint", endpoint.name)])
        state = Mutex(State(gate: EndpointGate(concurrency: endpoint.effectiveConcurrency, schedule: schedule)))
    }

    /// New rows may be due.
    func wake() { doorbell.ring() }

    /// Stops leasing; requests in flight run to their answer or timeout, then `run` returns.
    func stop() {
        state.withLock { $0.stopping = true }
        doorbell.ring()
    }

    var statistics: DaemonStatistics.Webhook {
        state.withLock { state in
            var counters = state.counters
            counters.inFlight = state.inFlight
            counters.failing = state.gate.isFailing
            return counters
        }
    }

    func run() async {
        await withDiscardingTaskGroup { group in
            while true {
                let completions = state.withLock { state in
                    defer { state.completions = [] }
                    return state.completions
                }
                var databaseDown = false
                if !completions.isEmpty {
                    do {
                        try await store.complete(completions)
                    } catch {
                        // Kept for the next round; until then the rows stay leased, so no other daemon sends them twice.
                        state.withLock { $0.completions.insert(contentsOf: completions, at: 0) }
                        logger.warning("cannot record webhook outcomes; retrying", metadata: ["error": "\(error)"])
                        databaseDown = true
                    }
                }
                let now = ContinuousClock.now
                let (permit, generation, stopping, settled, nextRetry) = state.withLock { state in
                    (
                        state.gate.permit(now: now, inFlight: state.inFlight), state.gate.generation, state.stopping,
                        state.inFlight == 0 && (state.completions.isEmpty || databaseDown), state.nextRetry
                    )
                }
                if stopping {
                    // What is not recorded stays leased, and is sent again after the next start.
                    if settled { break }
                    await doorbell.wait(timeout: Self.pollInterval)
                    continue
                }
                var timeout = Self.pollInterval
                if let nextRetry {
                    timeout = min(timeout, max(.zero, nextRetry - now))
                    if nextRetry <= now { state.withLock { $0.nextRetry = nil } }
                }
                switch permit {
                case .send(let slots) where !databaseDown:
                    do {
                        let leased = try await store.lease(endpoint, limit: slots)
                        if !leased.isEmpty {
                            state.withLock { $0.inFlight += leased.count }
                            for delivery in leased {
                                group.addTask { await self.attempt(delivery, generation: generation) }
                            }
                            // More may be due at once.
                            if leased.count == slots { continue }
                        }
                    } catch {
                        logger.warning("cannot lease webhook deliveries; retrying", metadata: ["error": "\(error)"])
                        timeout = .seconds(1)
                    }
                case .wait(let until):
                    timeout = min(timeout, max(.zero, until - now))
                case .send, .full:
                    break
                }
                await doorbell.wait(timeout: timeout)
            }
        }
        await sender.shutdown()
    }

    private func attempt(_ delivery: PendingDelivery, generation: Int) async {
        let started = ContinuousClock.now
        let result = await sender.send(eventID: delivery.eventID, body: delivery.body)
        let finished = ContinuousClock.now
        latency.recordNanoseconds(Int64((finished - started) / .nanoseconds(1)))
        let decision = DeliveryDecision.after(
            result.outcome, attempts: delivery.attempts, age: delivery.age + (finished - started),
            limits: endpoint.limits, schedule: schedule, jitter: .random(in: 0..<1)
        )
        let completion = CompletedDelivery(
            seq: delivery.seq, decision: decision, status: result.outcome.status, error: result.outcome.error,
            responseExcerpt: result.excerpt
        )
        state.withLock { state in
            state.inFlight -= 1
            state.gate.record(result.outcome, sentIn: generation, now: finished, jitter: .random(in: 0..<1))
            state.completions.append(completion)
            state.counters.attempts += 1
            state.counters.lastStatus = result.outcome.status
            state.counters.lastError = result.outcome.error
            switch decision {
            case .done:
                state.counters.successes += 1
            case .retry(let after):
                state.counters.failures += 1
                state.counters.retries += 1
                state.nextRetry = min(state.nextRetry ?? finished + after, finished + after)
            case .deadLetter:
                state.counters.failures += 1
                state.counters.deadLettered += 1
            }
        }
        switch decision {
        case .done:
            logger.debug("delivered", metadata: ["event": "\(delivery.eventID)", "attempt": "\(delivery.attempts)"])
        case .retry(let after):
            logger.info("delivery failed; will retry", metadata: [
                "event": "\(delivery.eventID)", "attempt": "\(delivery.attempts)",
                "error": "\(result.outcome.error ?? "")", "retry_in": "\(after.secondsText)",
            ])
        case .deadLetter(let reason):
            logger.warning("delivery given up; moved to the dead letters", metadata: [
                "event": "\(delivery.eventID)", "attempts": "\(delivery.attempts)", "reason": "\(reason)",
            ])
        }
        doorbell.ring()
    }
}
