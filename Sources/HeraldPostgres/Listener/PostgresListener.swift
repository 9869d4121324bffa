import Foundation
public import Herald
public import Logging
import Metrics
public import ServiceLifecycle
import Synchronization

/// LISTENs on one connection and hands every notification to the broker.
///
/// The connection lives on a dedicated thread that only reads, decodes and
/// publishes: it never waits on a subscriber. Reconnection follows
/// ``ReconnectStateMachine``. Run it as a `Service`; graceful shutdown or
/// cancellation stops the thread promptly.
public final class PostgresListener: Service, Sendable {
    /// Listener settings.
    public struct Configuration: Sendable {
        public var connection: ConnectionString
        /// Limit for establishing a connection and running LISTEN. Default 10 s.
        public var connectTimeout: Duration
        public var backoff: BackoffPolicy
        /// `nil` (the default) follows what the database was installed with;
        /// a value that differs from it fails the start.
        public var durability: Durability?
        /// Names this daemon's checkpoint, so several daemons can share a database. Default `default`.
        public var name: String
        /// How often progress is recorded while events flow. Default 1 s. A
        /// daemon killed without warning re-delivers at most this much.
        public var checkpointInterval: Duration
        /// How often the listener sends itself a probe notification and waits
        /// for it, to prove that notifications still reach it, not just that
        /// the socket is open; the first goes right after LISTEN. A probe not
        /// back within the connect timeout marks the connection broken, and
        /// the listener reconnects. Default 30 s.
        public var probeInterval: Duration
        /// How often a parked durable listener sweeps the journal for events
        /// whose notification never came; reading, it sweeps all the time.
        /// Events only this finds are counted, and that count should stay 0. Default 10 s.
        public var backstopInterval: Duration
        /// When a durable listener reads the journal and when it parks.
        var parking = ParkingStateMachine.Policy()

        public init(
            connection: ConnectionString,
            connectTimeout: Duration = .seconds(10),
            backoff: BackoffPolicy = .init(),
            durability: Durability? = nil,
            name: String = "default",
            checkpointInterval: Duration = .seconds(1),
            probeInterval: Duration = .seconds(30),
            backstopInterval: Duration = .seconds(10)
        ) {
            self.connection = connection
            self.connectTimeout = connectTimeout
            self.backoff = backoff
            self.durability = durability
            self.name = name
            self.checkpointInterval = checkpointInterval
            self.probeInterval = probeInterval
            self.backstopInterval = backstopInterval
        }
    }

    struct State {
        var started = false
        /// The channel the triggers notify on, read from the install at each connection.
        var channel = PostgresListener.uninstalledChannel
        var deliveredSnapshot: TransactionSnapshot?
        var deliveryObservers: [@Sendable () -> Void] = []
    }

    public let configuration: Configuration
    /// The listener's state, its durability once connected, and its progress.
    public let health = SourceHealth()
    /// Which step delivered each recent transaction: where a replay after it starts.
    public let deliveries = DeliveryRecord()
    let broker: Broker
    let logger: Logger
    let wake = WakeSignal()
    let state = Mutex(State())
    private let reconnectCount = Atomic<Int64>(0)
    private let catchUpEventCount = Atomic<Int64>(0)
    private let probeFailureCount = Atomic<Int64>(0)
    private let backstopEventCount = Atomic<Int64>(0)
    private let parkedFlag = Atomic<Bool>(false)
    private let observed = Atomic<Bool>(false)
    /// Delivery time minus the event's `at`, for every event handed to the broker.
    private let deliveryLag = Metrics.Timer(label: "pgherald_delivery_lag_seconds")

    /// The longest the thread waits without coming round its loop, when nothing is wedged.
    static let idleWake: Duration = .seconds(1)

    /// Connections re-established after a loss, since start.
    public var reconnects: Int64 { reconnectCount.load(ordering: .relaxed) }
    /// Events delivered from the journal after gaps, since start.
    public var catchUpEvents: Int64 { catchUpEventCount.load(ordering: .relaxed) }
    /// Probe notifications that did not come back in time, since start.
    public var probeFailures: Int64 { probeFailureCount.load(ordering: .relaxed) }

    /// Events that only the backstop found: their notification never came. Should stay 0.
    public var backstopEvents: Int64 { backstopEventCount.load(ordering: .relaxed) }
    /// Whether the durable listener is parked, waiting for the doorbell, rather than reading the journal.
    public var isParked: Bool { parkedFlag.load(ordering: .relaxed) }

    func recordBackstop(events: Int) {
        backstopEventCount.add(Int64(events), ordering: .relaxed)
    }

    func recordParked(_ parked: Bool) {
        parkedFlag.store(parked, ordering: .relaxed)
    }

    func recordReconnect() {
        reconnectCount.add(1, ordering: .relaxed)
    }

    func recordProbeFailure() {
        probeFailureCount.add(1, ordering: .relaxed)
    }

    func recordCatchUp(events: Int) {
        catchUpEventCount.add(Int64(events), ordering: .relaxed)
    }

    /// Records how long after its trigger ran each event reached the broker.
    func recordLag(of events: [Event]) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let nanoseconds = Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
        for event in events {
            guard let age = event.age(now: nanoseconds) else { continue }
            deliveryLag.recordNanoseconds(Int64(age / .nanoseconds(1)))
        }
    }

    public init(configuration: Configuration, broker: Broker, logger: Logger) {
        self.configuration = configuration
        self.broker = broker
        self.logger = logger
    }

    /// Durable mode: every journal event whose transaction is visible here has
    /// reached the broker, in this run or (visible in the checkpoint it
    /// started from) an earlier one; nil before the first sweep. Never moves back.
    public var deliveredSnapshot: TransactionSnapshot? { state.withLock { $0.deliveredSnapshot } }

    /// Calls `observer` each time ``deliveredSnapshot`` moves on, from the listener's thread: keep it short.
    public func onDelivered(_ observer: @escaping @Sendable () -> Void) {
        state.withLock { $0.deliveryObservers.append(observer) }
        observed.store(true, ordering: .relaxed)
    }

    /// Whether a durable output follows ``deliveredSnapshot``.
    var hasDeliveryObservers: Bool { observed.load(ordering: .relaxed) }

    /// Parked, the longest a live delivery waits for the tick that confirms
    /// it while a durable output follows the listener: the outputs' added
    /// latency, at the cost of a tick (two short statements) this often while events flow.
    static let durableFeedTickSpacing: Duration = .milliseconds(20)

    func recordDelivered(through snapshot: TransactionSnapshot?) {
        guard let snapshot else { return }
        let observers = state.withLock { state -> [@Sendable () -> Void] in
            guard state.deliveredSnapshot != snapshot, state.deliveredSnapshot.map({ snapshot.includes($0) }) ?? true else { return [] }
            state.deliveredSnapshot = snapshot
            return state.deliveryObservers
        }
        for observer in observers { observer() }
    }

    /// Runs until shutdown. Throws if the first connection fails.
    public func run() async throws {
        let alreadyStarted = state.withLock { state in
            defer { state.started = true }
            return state.started
        }
        precondition(!alreadyStarted, "a PostgresListener runs once")
        try await withGracefulShutdownHandler {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (finished: CheckedContinuation<Void, any Error>) in
                    let thread = Thread { [self] in
                        finished.resume(with: runLoop())
                    }
                    thread.name = "pgherald-listener"
                    thread.start()
                }
            } onCancel: {
                self.stop()
            }
        } onGracefulShutdown: {
            self.stop()
        }
    }

    /// Asks the listener thread to close its connection and end.
    public func stop() {
        wake.signal()
    }
}
