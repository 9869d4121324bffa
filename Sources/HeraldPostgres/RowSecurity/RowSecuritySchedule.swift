import DequeModule

/// Which cohorts the row-security gate judges next, on which of its
/// connections: a pure state machine, so that its fairness is tested without
/// a database.
///
/// Each cohort has a pipeline of its own: its batches are judged in order,
/// one script at a time. Cohorts whose next batch is the same are judged
/// together, in one script, with those whose checks cost alike: the cheap
/// ones; those for whom the batch's images are large; a cohort whose last
/// check took long is judged alone. Scripts for the expensive ones never
/// take the last free connection. So one user's large rows or slow policy
/// do not delay the cheap cohorts' events.
struct RowSecuritySchedule<Cohort: Hashable & Comparable & Sendable, Batch: Sendable> {
    struct Configuration: Sendable {
        /// Connections that judge live batches. At least 2, so that one is
        /// always left for cheap cohorts. Default 2: expensive cohorts take
        /// turns on one, so that together they keep at most one of the
        /// database's cores busy with their checks.
        var connections: Int
        /// How long a cohort's checks may run in a script it shares: past
        /// it they are cancelled, and the cohort is judged alone, so that
        /// the first slow batch of a cohort thought cheap delays the others
        /// by no more than this; it stays alone until a check of it is
        /// within it again. Default 25 ms, or 100 µs an image judged if
        /// longer: a policy that reads a membership table takes a few µs an
        /// image, and a 5 ms limit sent ordinary cohorts apart whenever the
        /// database was busy.
        var sharedCheckLimit: CheckBudget
        /// A cohort whose next batch has more row-image bytes than this, in
        /// the tables it follows, is judged alone for it. Default 64 KiB.
        var expensiveBytes: Int
        /// Events one script judges for a cohort that fell behind. Default 4096.
        var eventsPerScript: Int
        /// Row-image bytes one script judges for a cohort, unless a single
        /// batch has more: a check parses them all, and must end well within
        /// its statement timeout. Default 4 MiB.
        var bytesPerScript: Int
        /// Events a cohort may have waiting before its streams end, to
        /// resume from the journal. Default 65,536.
        var backlogLimit: Int
        /// Row-image bytes, in the tables it follows, that a cohort may have
        /// waiting before its streams end. Default 64 MiB.
        var backlogBytes: Int

        init(
            connections: Int = 2,
            sharedCheckLimit: CheckBudget = .init(floor: .milliseconds(25), perImage: .microseconds(100)),
            expensiveBytes: Int = 64 * 1024,
            eventsPerScript: Int = 4096, bytesPerScript: Int = 4 << 20, backlogLimit: Int = 65_536, backlogBytes: Int = 64 << 20
        ) {
            self.connections = max(2, connections)
            self.sharedCheckLimit = sharedCheckLimit
            self.expensiveBytes = expensiveBytes
            self.eventsPerScript = eventsPerScript
            self.bytesPerScript = bytesPerScript
            self.backlogLimit = backlogLimit
            self.backlogBytes = backlogBytes
        }
    }

    /// One script to run: `batches`, in order, judged for each of `cohorts` on `connection`.
    struct Job: Sendable {
        var connection: Int
        var cohorts: [Cohort]
        var batches: [Batch]
        /// Whether it runs on one of the connections for expensive cohorts.
        var isExpensive: Bool
    }

    private struct Waiting {
        var sequence: UInt64
        var batch: Batch
        var events: Int
        /// Row-image bytes in the tables the cohort followed when the batch came.
        var bytes: Int
    }

    private struct Pipeline {
        var waiting: Deque<Waiting> = []
        var waitingEvents = 0
        var waitingBytes = 0
        /// Batches taken by the job now running, which stay waiting until it ends.
        var running: Int?
        var slow = false
        /// Failed scripts in a row: after three refusals the cohort's streams end.
        var refusals = 0
    }

    let configuration: Configuration
    private var pipelines: [Cohort: Pipeline] = [:]
    private var idle: Set<Int>
    private var expensiveRunning = 0
    private var nextSequence: UInt64 = 0

    init(configuration: Configuration = .init()) {
        self.configuration = configuration
        idle = Set(0..<configuration.connections)
    }

    var cohortCount: Int { pipelines.count }

    /// Events waiting for `cohort`, not counting any being judged.
    func waitingEvents(of cohort: Cohort) -> Int { pipelines[cohort]?.waitingEvents ?? 0 }

    /// A cohort that takes batches from now on.
    mutating func add(_ cohort: Cohort) {
        if pipelines[cohort] == nil { pipelines[cohort] = Pipeline() }
    }

    /// Forgets `cohort` and what waits for it; a job running for it still ends with ``finished(_:slow:)``.
    mutating func remove(_ cohort: Cohort) {
        pipelines[cohort] = nil
    }

    /// Queues `batch` for every cohort. `bytes` gives the row-image bytes
    /// of the batch in the tables the cohort follows.
    /// - Returns: the cohorts whose backlog is now past the limit, removed: their streams end.
    mutating func arrived(_ batch: Batch, events: Int, bytes: (Cohort) -> Int) -> [Cohort] {
        nextSequence += 1
        var overflowed: [Cohort] = []
        for cohort in Array(pipelines.keys) {
            pipelines[cohort]!.waiting.append(Waiting(sequence: nextSequence, batch: batch, events: events, bytes: bytes(cohort)))
            pipelines[cohort]!.waitingEvents += events
            pipelines[cohort]!.waitingBytes += pipelines[cohort]!.waiting.last!.bytes
            if pipelines[cohort]!.waitingEvents > configuration.backlogLimit || pipelines[cohort]!.waitingBytes > configuration.backlogBytes {
                overflowed.append(cohort)
                pipelines[cohort] = nil
            }
        }
        return overflowed
    }

    /// The next script to run, if a connection is free and a cohort has a
    /// batch waiting; call until it returns nil.
    mutating func next() -> Job? {
        guard let firstIdle = idle.min() else { return nil }
        let ready = pipelines.filter { $0.value.running == nil && !$0.value.waiting.isEmpty }
        // The longest waiting first; a cohort never judged before its older batches.
        let byAge = ready.sorted { ($0.value.waiting[0].sequence, $0.key) < ($1.value.waiting[0].sequence, $1.key) }
        let expensiveAllowed = expensiveRunning < configuration.connections - 1
        for (cohort, pipeline) in byAge {
            let kind = kind(of: pipeline)
            guard kind == .cheap || expensiveAllowed else { continue }
            let sequence = pipeline.waiting[0].sequence
            // Cohorts whose checks cost alike share a script: none of them waits for a costlier one.
            let group = kind == .slow
                ? [cohort]
                : ready.filter { $0.value.waiting[0].sequence == sequence && self.kind(of: $0.value) == kind }.map(\.key).sorted()
            return start(group, of: kind, on: kind == .cheap ? firstIdle : idle.max()!)
        }
        return nil
    }

    /// What a cohort's next check costs, which decides whom it is judged with.
    private enum Kind {
        /// Judged with the other cheap cohorts at its batch.
        case cheap
        /// Its batch has large images: judged with the others for whom the same batch is large.
        case large
        /// Its last check was slow: judged alone.
        case slow
    }

    private func kind(of pipeline: Pipeline) -> Kind {
        if pipeline.slow { return .slow }
        return pipeline.waiting[0].bytes > configuration.expensiveBytes ? .large : .cheap
    }

    /// `group` judges the batches they all have waiting, up to a script's
    /// events and bytes; a cheap group stops at a batch that is large for one of them.
    private mutating func start(_ group: [Cohort], of kind: Kind, on connection: Int) -> Job {
        var taken = 0
        var events = 0
        var bytes = 0
        while true {
            let next = group.compactMap { pipelines[$0]!.waiting.dropFirst(taken).first }
            // The most any member judges: its images, not the others', are in its checks.
            let largest = next.map(\.bytes).max() ?? 0
            guard next.count == group.count, let head = next.first, taken == 0 || fits(events + head.events, bytes + largest),
                  next.allSatisfy({ $0.sequence == head.sequence && (kind != .cheap || $0.bytes <= configuration.expensiveBytes) })
            else { break }
            taken += 1
            events += head.events
            bytes += largest
        }
        for cohort in group { pipelines[cohort]!.running = taken }
        idle.remove(connection)
        if kind != .cheap { expensiveRunning += 1 }
        return Job(
            connection: connection, cohorts: group, batches: pipelines[group[0]]!.waiting.prefix(taken).map(\.batch), isExpensive: kind != .cheap
        )
    }

    private func fits(_ events: Int, _ bytes: Int) -> Bool {
        events <= configuration.eventsPerScript && bytes <= configuration.bytesPerScript
    }

    /// `job` was judged: its batches leave its cohorts' pipelines. `slow`
    /// names the cohorts whose check took longer than ``Configuration/sharedCheckLimit``;
    /// `overran` those whose check ran past ``Configuration/sharedCheckLimit``
    /// and was cancelled: their batches wait, to be judged alone.
    mutating func finished(_ job: Job, slow: Set<Cohort>, overran: Set<Cohort> = []) {
        release(job)
        for cohort in job.cohorts {
            guard var pipeline = pipelines[cohort], let taken = pipeline.running else { continue }
            pipeline.running = nil
            if overran.contains(cohort) {
                pipeline.slow = true
                pipelines[cohort] = pipeline
                continue
            }
            for waiting in pipeline.waiting.prefix(taken) {
                pipeline.waitingEvents -= waiting.events
                pipeline.waitingBytes -= waiting.bytes
            }
            pipeline.waiting.removeFirst(taken)
            pipeline.slow = slow.contains(cohort)
            pipeline.refusals = 0
            pipelines[cohort] = pipeline
        }
    }

    /// `job` could not run: its batches wait again. A refusal by the
    /// database (not a lost connection) counts against each cohort.
    /// - Returns: the cohorts refused three times in a row, removed: their streams end.
    mutating func failed(_ job: Job, refused: Bool) -> [Cohort] {
        release(job)
        var ended: [Cohort] = []
        for cohort in job.cohorts {
            guard var pipeline = pipelines[cohort], pipeline.running != nil else { continue }
            pipeline.running = nil
            if refused { pipeline.refusals += 1 }
            if pipeline.refusals >= 3 {
                ended.append(cohort)
                pipelines[cohort] = nil
            } else {
                pipelines[cohort] = pipeline
            }
        }
        return ended
    }

    private mutating func release(_ job: Job) {
        idle.insert(job.connection)
        if job.isExpensive { expensiveRunning -= 1 }
    }
}
