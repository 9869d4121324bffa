import DequeModule
public import Herald

/// One endpoint dispatcher's bookkeeping, as a value with no I/O: the room
/// it offers the feed, deliveries handed over and in flight, when to lease
/// due rows, retries it scheduled, the gate, and its counters. Each method
/// is one transition; the dispatcher does what the returned action says
/// (record, lease, send, wait) and reports back.
public struct DispatchStateMachine: Sendable {
    /// Time between looks for due rows that no doorbell announces: retries
    /// from other daemons and leases that ran out.
    public static let pollInterval: Duration = .seconds(1)

    /// Deliveries held in memory at most, in flight or about to be: enough
    /// to keep `concurrency` requests going between two feeding rounds.
    public let capacity: Int
    /// An ordered endpoint's events always go through rows, which keep their order.
    public let ordered: Bool
    public private(set) var gate: EndpointGate
    public private(set) var inFlight = 0
    private(set) var handedOver: Deque<PendingDelivery> = []
    /// Room promised to a feeding round that has not handed its deliveries over yet.
    public private(set) var reserved = 0
    /// Events wait in the journal until there is room for them.
    public private(set) var heldBack = false
    /// The receiver is failing, the gate lets a probe through and no row is
    /// due: the next feeding round hands over one event to probe with.
    public private(set) var probeWanted = false
    /// Outcomes not yet written back.
    public private(set) var completions: [CompletedDelivery] = []
    /// Rows may be due: the feed queued some, a retry's time came, or it is time to poll.
    public private(set) var rowsMayBeDue = true
    public private(set) var lastLease: ContinuousClock.Instant?
    /// The earliest retry this daemon scheduled and has not yet looked for.
    public private(set) var nextRetry: ContinuousClock.Instant?
    public private(set) var stopping = false
    public private(set) var counters = DaemonStatistics.Webhook()
    /// The wait a round settles on when nothing comes sooner.
    private var roundTimeout = Self.pollInterval

    public init(concurrency: Int, ordered: Bool, schedule: RetrySchedule = .init()) {
        gate = EndpointGate(concurrency: concurrency, schedule: schedule)
        capacity = 4 * gate.concurrency
        self.ordered = ordered
    }

    /// Handed over by the feed and not yet sent.
    public var handedOverCount: Int { handedOver.count }

    private var room: Int { capacity - inFlight - handedOver.count - reserved }

    // MARK: The feed's side

    /// Promises room for the deliveries of the next feeding round; nil when
    /// this endpoint's events are to be queued as rows (an ordered endpoint,
    /// or while stopping). Less room than half the capacity counts as none, so
    /// that a busy endpoint is fed in rounds of many events. While the receiver
    /// fails, only an event to probe with is asked for, once the gate lets a
    /// probe through and no row is due to probe with.
    public mutating func reserveRoom() -> Int? {
        guard !ordered, !stopping else { return nil }
        if gate.isFailing {
            heldBack = true
            guard probeWanted, inFlight == 0, handedOver.isEmpty, reserved == 0 else { return 0 }
            probeWanted = false
            reserved = 1
            return 1
        }
        let room = room
        guard room >= capacity / 2 else {
            heldBack = true
            return 0
        }
        reserved += room
        return room
    }

    /// The feeding round handed `deliveries` over, ending the promise of `reserved`.
    /// - Parameter heldBack: whether events still wait in the journal for room.
    public mutating func handOver(_ deliveries: [PendingDelivery], reserved: Int, heldBack: Bool) {
        self.reserved -= reserved
        handedOver.append(contentsOf: deliveries)
        self.heldBack = heldBack
    }

    /// The feeding round handed nothing over after all.
    public mutating func releaseRoom(_ reserved: Int) {
        self.reserved -= reserved
    }

    /// New rows may be due (the feed queued some).
    public mutating func rowsQueued() {
        rowsMayBeDue = true
    }

    /// Stops leasing and taking handed-over deliveries; requests in flight run to their answer.
    public mutating func stop() {
        stopping = true
    }

    // MARK: The dispatcher's rounds

    /// The outcomes to write back now.
    public mutating func takeCompletions() -> [CompletedDelivery] {
        defer { completions = [] }
        return completions
    }

    /// Writing `completions` back failed: they go first next round, and
    /// their rows stay leased meanwhile, so no other daemon sends them twice.
    public mutating func completionsNotRecorded(_ failed: [CompletedDelivery]) {
        completions.insert(contentsOf: failed, at: 0)
    }

    /// What a round of the dispatcher does.
    public enum Round: Sendable, Equatable {
        /// Handed-over deliveries were turned back into rows (the receiver
        /// fails, or the daemon stops): go round again to record them.
        case recordUnsent
        /// Stopping, and everything in flight is answered and recorded (or
        /// the database is away, and what was not recorded stays leased).
        case stopped
        /// Lease up to `slots` due rows if `leaseRows`, then ``leased(_:leaseFailed:)``.
        case send(slots: Int, generation: Int, leaseRows: Bool)
        /// Nothing to do before this long, or a doorbell.
        case wait(Duration)
    }

    /// Begins a round, after the completions were written back (`databaseDown` when that failed).
    public mutating func nextRound(now: ContinuousClock.Instant, databaseDown: Bool) -> Round {
        if stopping || gate.isFailing, !handedOver.isEmpty {
            completions.append(contentsOf: handedOver.map(CompletedDelivery.unsent))
            handedOver.removeAll()
            return .recordUnsent
        }
        if let retry = nextRetry, retry <= now {
            nextRetry = nil
            rowsMayBeDue = true
        }
        if let lastLease, now - lastLease >= Self.pollInterval { rowsMayBeDue = true }
        if stopping {
            let settled = inFlight == 0 && reserved == 0 && (completions.isEmpty || databaseDown)
            return settled ? .stopped : .wait(Self.pollInterval)
        }
        roundTimeout = nextRetry.map { min(Self.pollInterval, max(.zero, $0 - now)) } ?? Self.pollInterval
        switch gate.permit(now: now, inFlight: inFlight) {
        case .send(let slots) where !databaseDown:
            // Due rows first, so that retries are not starved by a steady stream of new events.
            if rowsMayBeDue { lastLease = now }
            return .send(slots: slots, generation: gate.generation, leaseRows: rowsMayBeDue)
        case .wait(let until):
            return .wait(min(roundTimeout, max(.zero, until - now)))
        case .send, .full:
            return .wait(roundTimeout)
        }
    }

    /// What to send after a ``Round/send(slots:generation:leaseRows:)``, and then what to do.
    public struct Sending: Sendable, Equatable {
        /// Handed-over deliveries to send beside the leased rows.
        public var handedOver: [PendingDelivery]
        /// Ring the feed: it is to hand over one event to probe the failing receiver with.
        public var askFeedForProbe: Bool
        /// Go round again at once (more rows may be due), or wait this long.
        public var thenWait: Duration?
    }

    /// `leased` rows came back for a round that could send `slots` (none, and `leaseFailed`, when leasing failed).
    public mutating func leased(_ leased: Int, slots: Int, leaseRows: Bool, leaseFailed: Bool) -> Sending {
        if leaseRows, !leaseFailed, leased < slots { rowsMayBeDue = false }
        let taken = Array(handedOver.prefix(max(0, slots - leased)))
        handedOver.removeFirst(taken.count)
        inFlight += leased + taken.count
        let askFeedForProbe = gate.isFailing && leaseRows && !leaseFailed && inFlight == 0 && reserved == 0
        if askFeedForProbe { probeWanted = true }
        let thenWait: Duration? = leased == slots ? nil : (leaseFailed ? Self.pollInterval : roundTimeout)
        return Sending(handedOver: taken, askFeedForProbe: askFeedForProbe, thenWait: thenWait)
    }

    // MARK: An attempt's answer

    /// What follows an answer: whether freed room asks the feed for a round,
    /// and the handed-over delivery to send next in the freed slot, at once.
    public struct AfterAttempt: Sendable, Equatable {
        public var askFeedForMore: Bool
        public var next: PendingDelivery?
        /// The gate's generation for `next`.
        public var generation: Int
    }

    /// An attempt sent in `generation` was answered with `outcome` at `now`, and `completion` says what becomes of it.
    public mutating func attemptFinished(
        _ completion: CompletedDelivery, outcome: DeliveryOutcome, generation: Int, now: ContinuousClock.Instant, jitter: Double
    ) -> AfterAttempt {
        inFlight -= 1
        gate.record(outcome, sentIn: generation, now: now, jitter: jitter)
        completions.append(completion)
        counters.attempts += 1
        counters.lastStatus = outcome.status
        counters.lastError = outcome.error
        switch completion.decision {
        case .done:
            counters.successes += 1
        case .retry(let after):
            counters.failures += 1
            counters.retries += 1
            nextRetry = min(nextRetry ?? now + after, now + after)
        case .deadLetter:
            counters.failures += 1
            counters.deadLettered += 1
        }
        var next: PendingDelivery?
        if !stopping, !handedOver.isEmpty, case .send = gate.permit(now: now, inFlight: inFlight) {
            next = handedOver.removeFirst()
            inFlight += 1
        }
        return AfterAttempt(askFeedForMore: heldBack && room >= capacity / 2, next: next, generation: gate.generation)
    }
}
