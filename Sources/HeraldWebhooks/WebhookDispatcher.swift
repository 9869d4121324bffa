import HeraldSupport
import Herald
import Logging
import Metrics
import Synchronization

/// Delivers one endpoint's events: those the feed hands over straight from
/// the journal, and due rows it leases (retries, and what the feed queued);
/// up to `concurrency` requests in flight, outcomes written back in batches.
///
/// It runs on its own tasks and its own HTTP connection pool, and waits only
/// on the database and its own receiver, so a hanging endpoint delays nothing else.
final class WebhookDispatcher: Sendable {
    let endpoint: WebhookEndpoint
    private let store: WebhookStore
    private let sender: WebhookSender
    private let schedule: RetrySchedule
    private let doorbell = Doorbell()
    private let logger: Logger
    private let latency: Metrics.Timer
    private let state: Mutex<DispatchStateMachine>

    /// Rung when room frees up while events wait in the journal.
    private let feedDoorbell: Doorbell

    init(endpoint: WebhookEndpoint, store: WebhookStore, feedDoorbell: Doorbell, version: String, schedule: RetrySchedule = .init(), logger: Logger) {
        self.endpoint = endpoint
        self.store = store
        self.feedDoorbell = feedDoorbell
        self.schedule = schedule
        sender = WebhookSender(endpoint: endpoint, version: version)
        var logger = logger
        logger[metadataKey: "endpoint"] = "\(endpoint.name)"
        self.logger = logger
        latency = Metrics.Timer(label: "pgherald_webhook_latency_seconds", dimensions: [("endpoint", endpoint.name)])
        state = Mutex(DispatchStateMachine(concurrency: endpoint.effectiveConcurrency, ordered: endpoint.ordered, schedule: schedule))
    }

    /// New rows may be due.
    func wake() {
        state.withLock { $0.rowsQueued() }
        doorbell.ring()
    }

    /// Promises room for deliveries handed over by the next feeding round
    /// (``DispatchStateMachine/reserveRoom()``). Each promise is ended by
    /// ``handOver(_:reserved:heldBack:)`` or ``releaseRoom(_:)``.
    func reserveRoom() -> Int? {
        state.withLock { $0.reserveRoom() }
    }

    /// - Parameter heldBack: whether events wait in the journal for room; if
    ///   so, freed room asks the feed for a round.
    func handOver(_ deliveries: [PendingDelivery], reserved: Int, heldBack: Bool) {
        state.withLock { $0.handOver(deliveries, reserved: reserved, heldBack: heldBack) }
        doorbell.ring()
    }

    func releaseRoom(_ reserved: Int) {
        state.withLock { $0.releaseRoom(reserved) }
    }

    /// Stops leasing; requests in flight run to their answer or timeout, then `run` returns.
    func stop() {
        state.withLock { $0.stop() }
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
        await withTaskExecutorPreference(EventLoopTaskExecutor(eventLoop: sender.eventLoop)) {
            await dispatch()
        }
        await sender.shutdown()
    }

    /// Rounds of: write outcomes back, then do what the state machine says.
    private func dispatch() async {
        await withDiscardingTaskGroup { group in
            while true {
                let completions = state.withLock { $0.takeCompletions() }
                var databaseDown = false
                if !completions.isEmpty {
                    do {
                        try await store.complete(completions, endpoint: endpoint)
                    } catch {
                        state.withLock { $0.completionsNotRecorded(completions) }
                        logger.warning("cannot record webhook outcomes; retrying", metadata: ["error": "\(error)"])
                        databaseDown = true
                    }
                }
                switch state.withLock({ $0.nextRound(now: .now, databaseDown: databaseDown) }) {
                case .recordUnsent:
                    continue
                case .stopped:
                    // What is not recorded stays leased, and is sent again after the next start.
                    return
                case .wait(let timeout):
                    await doorbell.wait(timeout: timeout)
                case .send(let slots, let generation, let leaseRows):
                    var leased: [PendingDelivery] = []
                    var leaseFailed = false
                    if leaseRows {
                        do {
                            leased = try await store.lease(endpoint, limit: slots)
                        } catch {
                            leaseFailed = true
                            logger.warning("cannot lease webhook deliveries; retrying", metadata: ["error": "\(error)"])
                        }
                    }
                    let sending = state.withLock { $0.leased(leased.count, slots: slots, leaseRows: leaseRows, leaseFailed: leaseFailed) }
                    if sending.askFeedForProbe { feedDoorbell.ring() }
                    for delivery in leased + sending.handedOver {
                        group.addTask { await self.attempt(delivery, generation: generation) }
                    }
                    if let timeout = sending.thenWait { await doorbell.wait(timeout: timeout) }
                }
            }
        }
    }

    /// Sends `delivery`, then goes on with handed-over deliveries for as long
    /// as the gate lets it, so that a freed slot is filled at once instead of
    /// waiting for the dispatcher's loop and its database work.
    private func attempt(_ delivery: PendingDelivery, generation: Int) async {
        var next: (delivery: PendingDelivery, generation: Int)? = (delivery, generation)
        while let (delivery, generation) = next {
            next = await attemptOnce(delivery, generation: generation)
        }
    }

    /// - Returns: the handed-over delivery to send next in this slot, if any.
    private func attemptOnce(_ delivery: PendingDelivery, generation: Int) async -> (PendingDelivery, Int)? {
        let started = ContinuousClock.now
        let result = await sender.send(eventID: delivery.eventID, body: delivery.body)
        let finished = ContinuousClock.now
        latency.recordNanoseconds(Int64((finished - started) / .nanoseconds(1)))
        let decision = DeliveryDecision.after(
            result.outcome, attempts: delivery.attempts, age: delivery.age + (finished - started),
            limits: endpoint.limits, schedule: schedule, jitter: .random(in: 0..<1)
        )
        let completion = CompletedDelivery(
            delivery: delivery, decision: decision, status: result.outcome.status, error: result.outcome.error,
            responseExcerpt: result.excerpt
        )
        let after = state.withLock {
            $0.attemptFinished(completion, outcome: result.outcome, generation: generation, now: finished, jitter: .random(in: 0..<1))
        }
        if after.askFeedForMore { feedDoorbell.ring() }
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
        return after.next.map { ($0, after.generation) }
    }
}
