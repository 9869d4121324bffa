/// When the listener proves its notification path: a probe is a
/// notification it sends itself, due every `interval`, and overdue once
/// `timeout` passes without anything arriving. Anything that arrives proves
/// the path, the probe's own notification or not: under a backlog the probe
/// may wait behind events longer than its timeout.
struct ProbeClock {
    let interval: Duration
    let timeout: Duration
    /// Probes sent on this connection; each carries its number.
    private(set) var sent: UInt64 = 0
    /// When the probe in flight went, if one is.
    private(set) var inFlightSince: ContinuousClock.Instant?
    private var last: ContinuousClock.Instant

    /// The first probe is due at once: it proves the LISTEN just made.
    init(interval: Duration, timeout: Duration, now: ContinuousClock.Instant) {
        self.interval = interval
        self.timeout = timeout
        last = now - .seconds(86_400)
    }

    /// Whether the probe in flight has had its time.
    func isOverdue(now: ContinuousClock.Instant) -> Bool {
        inFlightSince.map { now >= $0 + timeout } ?? false
    }

    /// Whether to send the next probe: none is in flight, and the interval has passed.
    func isDue(now: ContinuousClock.Instant) -> Bool {
        inFlightSince == nil && now >= last + interval
    }

    /// When the probe in flight is overdue, or the next one is due.
    var deadline: ContinuousClock.Instant {
        inFlightSince.map { $0 + timeout } ?? last + interval
    }

    /// A probe goes out; its number, for its payload.
    mutating func send(now: ContinuousClock.Instant) -> UInt64 {
        sent += 1
        last = now
        inFlightSince = now
        return sent
    }

    /// Notifications arrived: the path works, and no probe is in flight.
    mutating func heard() {
        inFlightSince = nil
    }
}
