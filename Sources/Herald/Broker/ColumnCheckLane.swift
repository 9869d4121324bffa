import DequeModule
import Dispatch
import Glibc
import Synchronization

/// A thread of low scheduling priority for the checks of columns that have
/// proved costly (a `like` over long rows).
///
/// The threads that deliver take the cores first: a subscriber whose
/// filters cost much, an attacker's included, cannot delay the events of
/// the subscribers whose filters cost little. Its own checks get what the
/// cores have left, in the order they were asked for.
public final class ColumnCheckLane: Sendable {
    /// The process's lane; its thread starts at the first use.
    public static let shared = ColumnCheckLane(niceness: 10)

    /// Past this much checking an event, a subscription's checks go to the lane.
    public static let costlyPerEvent: Duration = .microseconds(20)

    /// The CPU time of the calling thread: what a check cost, whatever else the machine ran meanwhile.
    public static func threadCPUTime() -> Duration {
        var now = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
        return .seconds(now.tv_sec) + .nanoseconds(now.tv_nsec)
    }

    private let jobs = Mutex(Deque<@Sendable () -> Void>())
    private let ready = DispatchSemaphore(value: 0)

    /// - Parameter niceness: the thread's nice value. At 10 it weighs about a
    ///   tenth of a delivering thread, so it yields to them at once, yet is
    ///   not starved on a busy machine.
    init(niceness: Int32) {
        let lane = Unmanaged.passRetained(LaneThread(lane: self, niceness: niceness)).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(&thread, nil, { argument in
            let owner = Unmanaged<LaneThread>.fromOpaque(argument!).takeRetainedValue()
            owner.run()
        }, lane)
        precondition(created == 0, "pgherald cannot start the column-check thread (error \(created))")
        pthread_detach(thread)
    }

    /// Runs `job` on the lane's thread, after the jobs asked for before it.
    public func submit(_ job: @escaping @Sendable () -> Void) {
        jobs.withLock { $0.append(job) }
        ready.signal()
    }

    /// What `work` returns, run on the lane's thread.
    public func run<Result: Sendable>(_ work: @escaping @Sendable () -> Result) async -> Result {
        await withCheckedContinuation { continuation in
            submit { continuation.resume(returning: work()) }
        }
    }

    fileprivate func next() -> @Sendable () -> Void {
        while true {
            ready.wait()
            if let job = jobs.withLock({ $0.popFirst() }) { return job }
        }
    }
}

/// The lane's thread: lowers its own priority, then runs jobs for good.
private final class LaneThread: Sendable {
    let lane: ColumnCheckLane
    let niceness: Int32

    init(lane: ColumnCheckLane, niceness: Int32) {
        self.lane = lane
        self.niceness = niceness
    }

    func run() -> Never {
        // On Linux a nice value is a thread's own: 0 names the calling thread alone.
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, niceness)
        Self.name("costly-checks")
        while true {
            lane.next()()
        }
    }

    /// Names the calling thread as `top -H` and `ps -L` show it, rather than after the pool thread
    /// that started it. Through procfs, since Swift's Glibc does not declare `pthread_setname_np`.
    private static func name(_ name: String) {
        let file = open("/proc/thread-self/comm", O_WRONLY)
        guard file >= 0 else { return }
        defer { close(file) }
        _ = name.withCString { write(file, $0, strlen($0)) }
    }
}
