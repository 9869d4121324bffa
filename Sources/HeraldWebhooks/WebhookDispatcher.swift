import HeraldSupport
import DequeModule
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
        /// Handed over by the feed and not yet sent.
        var handedOver: Deque<PendingDelivery> = []
        /// Room promised to a feeding round that has not handed its deliveries over yet.
        var reserved = 0
        /// Events wait in the journal until there is room for them.
        var heldBack = false
        /// The receiver is failing, the gate lets a probe through and no row
        /// is due: the next feeding round hands over one event to probe with.
        var probeWanted = false
        var completions: [CompletedDelivery] = []
        /// Rows may be due: the feed queued some, a retry's time came, or it is time to poll.
        var rowsMayBeDue = true
        var lastLease: ContinuousClock.Instant?
        /// The earliest retry this daemon scheduled and has not yet looked for.
        var nextRetry: ContinuousClock.Instant?
        var stopping = false
        var counters = DaemonStatistics.Webhook()
    }

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
        state = Mutex(State(gate: EndpointGate(concurrency: endpoint.effectiveConcurrency, schedule: schedule)))
    }

    /// New rows may be due.
    func wake() {
        state.withLock { $0.rowsMayBeDue = true }
        doorbell.ring()
    }

    /// Deliveries held in memory at most, in flight or about to be: enough
    /// to keep `concurrency` requests going between two feeding rounds. The
    /// backlog beyond waits in the journal.
    var capacity: Int { 4 * endpoint.effectiveConcurrency }

    /// Promises room for deliveries handed over by the next feeding round, or
    /// `nil` when this endpoint's events are to be queued as rows: for an
    /// ordered endpoint (whose rows keep the order), or while stopping.
    /// Each promise is ended by ``handOver(_:reserved:heldBack:)`` or ``releaseRoom(_:)``.
    ///
    /// Less room than half the capacity counts as none, so that a busy
    /// endpoint is fed in rounds of many events rather than many rounds of a
    /// few; once that much room is free again, the dispatcher asks for a round.
    ///
    /// While the receiver fails, the backlog waits in the journal at no cost
    /// to anyone else, and only an event to probe with is handed over, when
    /// the gate lets a probe through and no row is due to probe with.
    func reserveRoom() -> Int? {
        state.withLock { state in
            guard !endpoint.ordered, !state.stopping else { return nil }
            if state.gate.isFailing {
                state.heldBack = true
                guard state.probeWanted, state.inFlight == 0, state.handedOver.isEmpty, state.reserved == 0 else { return 0 }
                state.probeWanted = false
                state.reserved = 1
                return 1
            }
            let room = capacity - state.inFlight - state.handedOver.count - state.reserved
            guard room >= capacity / 2 else {
                state.heldBack = true
                return 0
            }
            state.reserved += room
            return room
        }
    }

    /// - Parameter heldBack: whether events wait in the journal for room; if
    ///   so, freed room asks the feed for a round.
    func handOver(_ deliveries: [PendingDelivery], reserved: Int, heldBack: Bool) {
        state.withLock { state in
            state.reserved -= reserved
            state.handedOver.append(contentsOf: deliveries)
            state.heldBack = heldBack
        }
        doorbell.ring()
    }

    func releaseRoom(_ reserved: Int) {
        state.withLock { $0.reserved -= reserved }
    }

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
        await withTaskExecutorPreference(EventLoopTaskExecutor(eventLoop: sender.eventLoop)) {
            await dispatch()
        }
        await sender.shutdown()
    }

    private func dispatch() async {
        await withDiscardingTaskGroup { group in
            while true {
                let completions = state.withLock { state in
                    defer { state.completions = [] }
                    return state.completions
                }
                var databaseDown = false
                if !completions.isEmpty {
                    do {
                        try await store.complete(completions, endpoint: endpoint)
                    } catch {
                        // Kept for the next round; until then the rows stay leased, so no other daemon sends them twice.
                        state.withLock { $0.completions.insert(contentsOf: completions, at: 0) }
                        logger.warning("cannot record webhook outcomes; retrying", metadata: ["error": "\(error)"])
                        databaseDown = true
                    }
                }
                let now = ContinuousClock.now
                let (permit, generation, stopping, settled, spilled) = state.withLock { state in
                    // Unsent handed-over events wait as rows while the receiver fails or the daemon stops.
                    var spilled = 0
                    if state.stopping || state.gate.isFailing, !state.handedOver.isEmpty {
                        spilled = state.handedOver.count
                        state.completions.append(contentsOf: state.handedOver.map(CompletedDelivery.unsent))
                        state.handedOver.removeAll()
                    }
                    if let nextRetry = state.nextRetry, nextRetry <= now {
                        state.nextRetry = nil
                        state.rowsMayBeDue = true
                    }
                    if let lastLease = state.lastLease, now - lastLease >= Self.pollInterval { state.rowsMayBeDue = true }
                    return (
                        state.gate.permit(now: now, inFlight: state.inFlight), state.gate.generation, state.stopping,
                        state.inFlight == 0 && state.reserved == 0 && (state.completions.isEmpty || databaseDown), spilled
                    )
                }
                if spilled > 0 { continue }
                if stopping {
                    // What is not recorded stays leased, and is sent again after the next start.
                    if settled { break }
                    await doorbell.wait(timeout: Self.pollInterval)
                    continue
                }
                var timeout = state.withLock { state in
                    state.nextRetry.map { min(Self.pollInterval, max(.zero, $0 - now)) } ?? Self.pollInterval
                }
                switch permit {
                case .send(let slots) where !databaseDown:
                    // Due rows first, so that retries are not starved by a steady stream of new events.
                    let leaseRows = state.withLock { state in
                        if state.rowsMayBeDue { state.lastLease = now }
                        return state.rowsMayBeDue
                    }
                    var leased: [PendingDelivery] = []
                    var leaseFailed = false
                    if leaseRows {
                        do {
                            leased = try await store.lease(endpoint, limit: slots)
                        } catch {
                            leaseFailed = true
                            logger.warning("cannot lease webhook deliveries; retrying", metadata: ["error": "\(error)"])
                            timeout = .seconds(1)
                        }
                    }
                    let (handedOver, probeWanted) = state.withLock { state in
                        if leaseRows, !leaseFailed, leased.count < slots { state.rowsMayBeDue = false }
                        let taken = Array(state.handedOver.prefix(max(0, slots - leased.count)))
                        state.handedOver.removeFirst(taken.count)
                        state.inFlight += leased.count + taken.count
                        let probeWanted = state.gate.isFailing && leaseRows && !leaseFailed && state.inFlight == 0 && state.reserved == 0
                        if probeWanted { state.probeWanted = true }
                        return (taken, probeWanted)
                    }
                    if probeWanted { feedDoorbell.ring() }
                    for delivery in leased + handedOver {
                        group.addTask { await self.attempt(delivery, generation: generation) }
                    }
                    // More may be due at once.
                    if leased.count == slots { continue }
                case .wait(let until):
                    timeout = min(timeout, max(.zero, until - now))
                case .send, .full:
                    break
                }
                await doorbell.wait(timeout: timeout)
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
        let (askForMore, next) = state.withLock { state in
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
            var next: (PendingDelivery, Int)?
            if !state.stopping, !state.handedOver.isEmpty, case .send = state.gate.permit(now: finished, inFlight: state.inFlight) {
                next = (state.handedOver.removeFirst(), state.gate.generation)
                state.inFlight += 1
            }
            let room = capacity - state.inFlight - state.handedOver.count - state.reserved
            return (state.heldBack && room >= capacity / 2, next)
        }
        if askForMore { feedDoorbell.ring() }
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
        return next
    }
}
