/// When a durable listener reads the journal and when it parks to wait for
/// the doorbell: pure, no I/O.
///
/// Reading, the listener sweeps the journal so that a sweep feeds about
/// ``Policy/sweepBatch`` deliveries (events times the subscribers they
/// reach) at the rate of the last window:
/// every ``Policy/pollInterval`` at the fastest, every
/// ``Policy/longestPollInterval`` at the slowest, every
/// ``Policy/busyPollInterval`` while events come at ``Policy/busyRate`` or
/// faster, and at once while a sweep comes back full. Writers commit without
/// NOTIFY and its database-wide lock. Once sweeps
/// have found nothing for ``Policy/parkAfter``, or fewer than half of
/// ``Policy/wakeRings`` events in a ``Policy/wakeWindow``, it parks: writers
/// notify again, which costs little while they are few, and a notification
/// carries its event at once. When notifications come faster than
/// ``Policy/wakeRings`` in ``Policy/wakeWindow``, it reads again.
struct ParkingStateMachine {
    struct Policy: Sendable {
        /// The shortest wait between sweeps while reading.
        var pollInterval: Duration = .milliseconds(1)
        /// The longest wait between sweeps while reading: the most latency reading adds.
        var longestPollInterval: Duration = .milliseconds(8)
        /// The deliveries a sweep should feed. A sweep costs the daemon four
        /// context switches and its code run from a cold cache, about 150 µs
        /// on two cores: with one subscriber at 2,000 events/s, sweeps 1 ms
        /// apart cost 59 µs an event, 8 ms apart 23. With 100 subscribers a
        /// sweep 1 ms apart feeds more than this, and latency stays as it was.
        var sweepBatch = 16
        /// The wait between sweeps while events come at ``busyRate`` or
        /// faster. A sweep costs the database and the daemon about the same
        /// however many events it finds, and under such a load the writers
        /// want the CPU: at 16 writers on two cores, sweeps 3 ms apart left
        /// them 10–17 % more commits than sweeps 1 ms apart, for at most 2 ms
        /// more latency.
        var busyPollInterval: Duration = .milliseconds(3)
        /// Events per second, over a ``wakeWindow``, from which reading is busy.
        var busyRate = 8_000
        /// How long sweeps find nothing before the listener parks.
        var parkAfter: Duration = .milliseconds(20)
        /// Notifications within ``wakeWindow`` that make a parked listener read again.
        var wakeRings = 32
        var wakeWindow: Duration = .milliseconds(20)
        /// The first wait between sweeps for transactions that may commit without
        /// ringing; it doubles up to ``unrungPollLimit``, the longest such an event waits.
        var unrungPoll: Duration = .milliseconds(2)
        var unrungPollLimit: Duration = .milliseconds(100)
    }

    enum Action: Equatable {
        /// Read the journal up to now.
        case sweep
        /// Mark the listener parked in the database, then sweep.
        case park
        /// Mark the listener reading in the database, then sweep.
        case unpark
        /// Wait for a notification until then.
        case wait(until: ContinuousClock.Instant)
    }

    private enum State {
        case reading(lastFound: ContinuousClock.Instant, nextSweep: ContinuousClock.Instant, window: ReadWindow)
        /// Parked; the closing sweep, which follows at once, is still due.
        case parking
        case parked(ringsSince: ContinuousClock.Instant, rings: Int, unrungPoll: Duration, nextSweep: ContinuousClock.Instant?)
    }

    /// Events found since `start`, to tell a load that no longer needs reading.
    private struct ReadWindow {
        var start: ContinuousClock.Instant
        var found = 0
        /// The last full window found fewer than half the wake rate.
        var slow = false
        /// The last full window found events at the busy rate or faster.
        var busy = false
        var delivered = 0
        /// Deliveries per second in the last full window.
        var deliveryRate = 0.0
        /// The last full window found events.
        var foundAny = false
    }

    let policy: Policy
    private var state: State

    /// Starts reading: a connection catches up first.
    init(policy: Policy, now: ContinuousClock.Instant) {
        self.policy = policy
        self.state = .reading(lastFound: now, nextSweep: now, window: ReadWindow(start: now))
    }

    var isParked: Bool {
        if case .parked = state { return true }
        return false
    }

    /// Marked parked, with the closing sweep still due.
    var isClosing: Bool {
        if case .parking = state { return true }
        return false
    }

    func next(now: ContinuousClock.Instant) -> Action {
        switch state {
        case .reading(let lastFound, let nextSweep, let window):
            if window.slow { return .park }
            if now < nextSweep { return .wait(until: nextSweep) }
            return now - lastFound >= policy.parkAfter ? .park : .sweep
        case .parking:
            return .sweep
        case .parked(_, let rings, _, let nextSweep):
            if rings >= policy.wakeRings { return .unpark }
            guard let nextSweep else { return .wait(until: now + .seconds(3600)) }
            return now < nextSweep ? .wait(until: nextSweep) : .sweep
        }
    }

    /// A sweep found `found` events and handed them to `deliveries`
    /// subscribers' worth (default: one each); `full` when it stopped at its
    /// page limit, `unrung` when transactions that may commit without
    /// ringing remain.
    mutating func swept(found: Int, deliveries: Int? = nil, full: Bool, unrung: Bool, now: ContinuousClock.Instant) {
        switch state {
        case .reading(let lastFound, _, var window):
            window.found += found
            window.delivered += deliveries ?? found
            let elapsed = now - window.start
            if elapsed >= policy.wakeWindow {
                window.slow = window.found * 2 < policy.wakeRings
                window.busy = Double(window.found) >= Double(policy.busyRate) * (elapsed / .seconds(1))
                window.deliveryRate = Double(window.delivered) / (elapsed / .seconds(1))
                window.foundAny = window.found > 0
                window.start = now
                window.found = 0
                window.delivered = 0
            }
            let interval = readingInterval(window)
            if found > 0 {
                state = .reading(lastFound: now, nextSweep: full ? now : now + interval, window: window)
            } else {
                // Due at once when it is time to park, which the next action says.
                let parkAt = lastFound + policy.parkAfter
                state = .reading(lastFound: lastFound, nextSweep: min(now + interval, parkAt), window: window)
            }
        case .parking:
            state = .parked(ringsSince: now, rings: 0, unrungPoll: policy.unrungPoll, nextSweep: unrung ? now + policy.unrungPoll : nil)
        case .parked(let since, let rings, let poll, _):
            let longer = min(poll * 2, policy.unrungPollLimit)
            state = .parked(ringsSince: since, rings: rings, unrungPoll: longer, nextSweep: unrung ? now + longer : nil)
        }
    }

    /// The wait between sweeps while reading at the last window's rate.
    private func readingInterval(_ window: ReadWindow) -> Duration {
        if window.busy { return policy.busyPollInterval }
        // Events that nobody takes are not worth a sweep a millisecond.
        guard window.deliveryRate > 0 else { return window.foundAny ? policy.longestPollInterval : policy.pollInterval }
        let spaced = Duration.seconds(Double(policy.sweepBatch) / window.deliveryRate)
        return min(max(spaced, policy.pollInterval), policy.longestPollInterval)
    }

    /// The listener is marked parked; the closing sweep comes next.
    mutating func didPark() {
        state = .parking
    }

    /// The listener is marked reading.
    mutating func didUnpark(now: ContinuousClock.Instant) {
        state = .reading(lastFound: now, nextSweep: now, window: ReadWindow(start: now))
    }

    /// `count` notifications carried events.
    mutating func rang(_ count: Int, now: ContinuousClock.Instant) {
        guard case .parked(let since, let rings, let poll, let nextSweep) = state, count > 0 else { return }
        if now - since > policy.wakeWindow {
            state = .parked(ringsSince: now, rings: count, unrungPoll: poll, nextSweep: nextSweep)
        } else {
            state = .parked(ringsSince: since, rings: rings + count, unrungPoll: poll, nextSweep: nextSweep)
        }
    }

    /// A notification came that a sweep must deliver, in order with commits
    /// that did not ring: sweep now.
    mutating func sweepSoon(now: ContinuousClock.Instant) {
        switch state {
        case .reading(let lastFound, _, let window):
            state = .reading(lastFound: lastFound, nextSweep: now, window: window)
        case .parking:
            break
        case .parked(let since, let rings, let poll, _):
            state = .parked(ringsSince: since, rings: rings, unrungPoll: poll, nextSweep: now)
        }
    }
}
