import Synchronization

/// What an event source reports for health checks, statistics and the
/// watchdog: its state, the durability of what it delivers, how far it has
/// read, and when it last showed it was not stuck.
///
/// Every source keeps one and reports into it; `/healthz`, `/stats`,
/// `/metrics`, systemd and the outputs that wait for a first connection read
/// it, whichever source feeds the daemon.
public final class SourceHealth: Sendable {
    /// What the source is doing.
    public enum Status: Sendable, Hashable {
        case notStarted
        case connecting
        /// Connected, replaying what was committed or published during a gap.
        case catchingUp
        case listening
        case reconnecting(attempt: Int, lastError: String)
        case stopped
    }

    /// How far a source that reads a stream elsewhere has read; a database's
    /// listener reports none.
    public struct Position: Sendable, Hashable {
        /// Where the events come from, such as `nats stream PGHERALD`.
        public var source: String
        /// The last position read (a stream sequence).
        public var position: UInt64?
        /// Positions the source holds past it.
        public var lag: UInt64?

        public init(source: String, position: UInt64?, lag: UInt64?) {
            self.source = source
            self.position = position
            self.lag = lag
        }
    }

    private struct Waiter {
        let predicate: @Sendable (Status) -> Bool
        let continuation: CheckedContinuation<Status, Never>
    }

    private struct State {
        var status: Status = .notStarted
        var waiters: [Waiter] = []
        var durability: Durability?
        var position: Position?
    }

    private let state: Mutex<State>
    /// When the source last came round its loop, in nanoseconds after `createdAt`.
    private let progress = Atomic<Int64>(0)
    private let createdAt = ContinuousClock.now

    /// - Parameter durability: what the source delivers, when known before it connects.
    public init(durability: Durability? = nil) {
        state = Mutex(State(durability: durability))
    }

    public var status: Status { state.withLock { $0.status } }

    /// The durability in force, once the source knows it: a database's
    /// listener finds it at its first connection; a stream's events were
    /// durable where they came from.
    public var durability: Durability? { state.withLock { $0.durability } }

    /// How far a stream elsewhere has been read; nil for a database's listener.
    public var position: Position? { state.withLock { $0.position } }

    /// How long ago the source last showed it was not stuck.
    public var timeSinceProgress: Duration {
        let last = createdAt + .nanoseconds(progress.load(ordering: .relaxed))
        return ContinuousClock.now - last
    }

    /// Shows that the source is not stuck, for the watchdog.
    public func recordProgress() {
        progress.store(Int64((ContinuousClock.now - createdAt) / .nanoseconds(1)), ordering: .relaxed)
    }

    /// Records how far a stream elsewhere has been read, and shows progress; the state stays as it is.
    public func recordPosition(_ position: Position) {
        recordProgress()
        state.withLock { $0.position = position }
    }

    public func recordDurability(_ durability: Durability) {
        state.withLock { $0.durability = durability }
    }

    /// Records the state, wakes those waiting for it, and shows progress.
    public func report(_ status: Status, position: Position? = nil) {
        recordProgress()
        let satisfied = state.withLock { state -> [Waiter] in
            if let position { state.position = position }
            guard state.status != status else { return [] }
            state.status = status
            var satisfied: [Waiter] = []
            state.waiters.removeAll { waiter in
                let done = waiter.predicate(status) || status == .stopped
                if done { satisfied.append(waiter) }
                return done
            }
            return satisfied
        }
        for waiter in satisfied { waiter.continuation.resume(returning: status) }
    }

    /// Waits until the source reaches a status for which `predicate` holds,
    /// or stops, and returns that status.
    @discardableResult
    public func waitForStatus(where predicate: @escaping @Sendable (Status) -> Bool) async -> Status {
        await withCheckedContinuation { continuation in
            let current: Status? = state.withLock { state in
                if predicate(state.status) || state.status == .stopped { return state.status }
                state.waiters.append(Waiter(predicate: predicate, continuation: continuation))
                return nil
            }
            if let current { continuation.resume(returning: current) }
        }
    }

    /// Waits until the first connection has answered (catching up or listening); false if the source stopped instead.
    public func waitUntilConnected() async -> Bool {
        await waitForStatus { $0 != .notStarted && $0 != .connecting } != .stopped
    }

    /// Waits until the source is receiving events; false if it stopped instead.
    public func waitUntilListening() async -> Bool {
        await waitForStatus { $0 == .listening } == .listening
    }
}
