import Herald
/// The results file `scripts/bench` writes: the machine, the write-overhead
/// rounds, and one ``Run`` per measured load.
struct BenchResults: Codable {
    var date: String
    var mode: String
    var machine: String
    var postgres: String
    var writeOverhead: WriteOverhead?
    /// Absent in results from before it was measured.
    var bulkStatements: BulkStatements?
    /// Scenario l.'s writers with no trigger (no events to receive); absent before it was measured.
    var writersWithoutTrigger: [WriterBaseline]?
    /// Scenario l.'s references, run with no daemon; absent before they were measured.
    var writersReferences: [WriterReference]?
    /// Scenario r.: the kernel's cost of the same writes with nothing else done (bench/floor.c); absent before it was measured.
    var floor: [Floor]?
    /// Scenario u.: WAL per single-row durable transaction, by trigger; absent before it was measured.
    var walPerWrite: [WALPerWrite]?
    /// Scenario u.: the journal under writers for minutes, without vacuum; absent before it was measured.
    var journalVacuum: JournalVacuum?
    var runs: [Run]

    /// WAL one single-row transaction writes with a trigger (`none`, `plpgsql`, `native`).
    struct WALPerWrite: Codable {
        var trigger: String
        var bytesPerTransaction: Double
    }

    /// Writers against a daemon with a short retention: the journal's size over time and vacuum's work on it.
    struct JournalVacuum: Codable {
        var seconds: Int
        var writers: Int
        var retentionSeconds: Int
        var writerTPS: Double?
        /// Events emptied from the journal with its parts.
        var pruned: Int
        /// Vacuums (automatic and manual) and autoanalyzes of the journal's tables.
        var autovacuums: Int?
        var autoanalyzes: Int?
        var deadRows: Int?
        var samples: [Sample]

        struct Sample: Codable {
            var seconds: Int
            var bytes: Int
            var rows: Int
            var current: Int
        }
    }

    /// One run of bench/floor.c: a writer writing each event's frame to every socket, an epoll reader reading them.
    struct Floor: Codable {
        var sockets: Int
        var eventsPerSecond: Int
        var frameBytes: Int
        var writes: Int
        var writerMicrosecondsPerWrite: Double
        var readerMicrosecondsPerRead: Double
    }

    /// No trigger's TPS for one writer count: the median, and each round's
    /// (absent from runs of one round).
    struct WriterBaseline: Codable {
        var writers: Int
        var tps: Double
        var rounds: [Double]?

        /// TPS in round `round` (from 1); the median where rounds were not kept.
        func tps(inRound round: Int) -> Double {
            rounds.flatMap { round <= $0.count ? $0[round - 1] : nil } ?? tps
        }
    }

    /// Writers against a trigger that is not pgherald's, or against
    /// pgherald's with no daemon running: what the cost is made of.
    struct WriterReference: Codable {
        var label: String
        var counts: [WriterBaseline]
    }

    struct WriteOverhead: Codable {
        var clients: Int
        var seconds: Int
        var variants: [Variant]

        /// One trigger's TPS, round by round.
        struct Variant: Codable {
            var trigger: String
            var tps: [Double]
        }
    }

    /// One INSERT ... SELECT per transaction, by rows per statement and trigger.
    struct BulkStatements: Codable {
        var variants: [Variant]

        /// One trigger's mean milliseconds per statement of `rows` rows, round by round.
        struct Variant: Codable {
            var trigger: String
            var rows: Int
            var milliseconds: [Double]
        }

        var sizes: [Int] { Array(Set(variants.map(\.rows))).sorted() }

        func medianMilliseconds(_ trigger: String, rows: Int) -> Double? {
            variants.first { $0.trigger == trigger && $0.rows == rows }.flatMap { median($0.milliseconds) }
        }

        /// The median over rounds of the trigger's time divided by no trigger's in the same round.
        func medianRatio(_ trigger: String, rows: Int) -> Double? {
            guard let variant = variants.first(where: { $0.trigger == trigger && $0.rows == rows }),
                  let base = variants.first(where: { $0.trigger == "none" && $0.rows == rows }) else { return nil }
            return median(zip(variant.milliseconds, base.milliseconds).map { $0 / $1 })
        }
    }

    /// The writer's transactions, from pgbench's per-transaction log.
    struct CommitLatency: Codable {
        var p99: Double
        var max: Double
    }

    /// A load client's result with what the driver measured around it.
    struct Run: Codable {
        var result: LoadResult
        /// Rows the writer committed.
        var committed: Int
        /// The writer's TPS as pgbench reports it; absent for a single burst transaction.
        var writerTPS: Double?
        /// pgbench clients; absent in results from before it was recorded.
        var writers: Int?
        /// The writer's fixed rate; absent at full speed.
        var rate: Int?
        /// Rows in each of the writer's transactions; absent in results from before it varied (one).
        var rowsPerTransaction: Int?
        var payloadBytes: Int?
        var daemonCPUSeconds: Double?
        var daemonRSSKiB: Int?
        var daemonPeakRSSKiB: Int?
        /// Wall clock when the writer's last commit returned.
        var commitEndMicroseconds: Int64?
        /// Lines in the daemon's event log after the run, when it kept one.
        var eventLogLines: Int?
        /// Scenario n.: what a nats-py subscriber received from the `nats:` output, and what JetStream acknowledged.
        var nats: NATSFigures?
        /// Scenario o.: the queries PostgreSQL ran for the apps.
        var liveQueries: LiveQueryFigures?
        /// Scenario s.: the daemon's row-level-security counters after the run (it starts afresh for each).
        var rowSecurity: RowSecurityStatistics?
        /// Scenario s.: CPU of the PostgreSQL backend that ran the checks, over the daemon's life.
        var rowSecurityBackendCPUSeconds: Double?
        /// Scenario u.: CPU of the daemon's listening backend over the run.
        var listenerBackendCPUSeconds: Double?
        /// How long the writer's own transactions took, schedule lag left out:
        /// what of an event's latency its commit already was. Absent for a
        /// burst and in results from before it was recorded.
        var commitLatencyMilliseconds: CommitLatency?
        /// Scenario v.: each member's CPU (and nats-server's) over the run, on the first load client's result.
        var memberCPUSeconds: [String: Double]?
        /// Scenario v.: scans of the journal's tables in PostgreSQL over the run.
        var journalScans: Int?
        /// Scenario v.: how long the writer ran.
        var runSeconds: Double?
        /// Scenario w.: what the attacking key held and sent while the bystanders were measured.
        var attack: AttackFigures?
        /// Scenario y.: what the herd's resumes cost the journal (`/stats` replays); absent after resumes from memory.
        var replays: DaemonStatistics.Replays?
        /// From the load client's start until every stream was open.
        var openSeconds: Double?
        /// Scenario z.: from the load client's exit until `/stats` counted no subscriber.
        var closeSeconds: Double?
        /// Scenario z.: each daemon thread's CPU over the run, the busiest first (threads under 0.05 s left out).
        var threadCPUSeconds: [ThreadCPU]?
        /// Scenario z.: the daemon's resident memory before the streams opened.
        var idleRSSBeforeKiB: Int?
    }

    struct ThreadCPU: Codable {
        var thread: String
        var cpuSeconds: Double
    }

    /// Scenario w.: one realtime key's attacks at their limits, as bench/attack.py counted them.
    struct AttackFigures: Codable {
        var seconds: Double
        /// WebSocket upgrades the key got, and those answered 429.
        var connections: Int
        var connectionsRefused: Int
        /// postgres_changes channels joined with like filters, and joins refused.
        var channels: Int
        var channelsRefused: Int
        /// `/events?where=` streams of like patterns on the attacked table, and the lines they read.
        var likeStreams: Int
        var likeStreamLines: Int
        /// Broadcasts sent to a member that never reads, their bytes, and those refused.
        var broadcasts: Int
        var broadcastBytes: Int
        var broadcastsRefused: Int
        /// Broadcasts not sent because the daemon had not yet taken 1 MiB already sent: it reads a socket no faster than it handles it.
        var broadcastsHeldBack: Int?
        /// Presence tracks with large metas.
        var presenceTracks: Int
        /// Bytes all the attacker's sockets read, the non-reader's aside.
        var bytesRead: Int
        /// Attacker sockets the daemon closed while the attack ran.
        var closedByDaemon: Int?
        /// Rows of 2,000 characters its writer committed to the attacked table.
        var rowsWritten: Int?
        /// The connections and channels the daemon counted for the key (`/stats`), just after the bystanders' run.
        var heldByKey: Held?

        struct Held: Codable {
            var connections: Int
            var channels: Int
        }
    }

    /// The queries run while the apps followed one query.
    struct LiveQueryFigures: Codable {
        /// By the daemon (shared) or by the apps themselves (seed).
        var queriesRun: Int
        var daemonEvaluations: Int
        /// The writers' run, or the quiet wait.
        var seconds: Int
    }

    /// Receipt by a nats-py subscriber, measured from the event's `at`.
    struct NATSFigures: Codable {
        var received: Int
        /// First to last receipt.
        var seconds: Double
        var p50Milliseconds: Double?
        var p99Milliseconds: Double?
        /// Events JetStream acknowledged, as the daemon counted them.
        var acknowledged: Int?
    }

    func runs(_ scenario: String) -> [Run] {
        runs.filter { $0.result.scenario == scenario }
    }
}

extension BenchResults.Run {
    /// Events delivered per second over the receiving window.
    var deliveriesPerSecond: Double? {
        guard let first = result.firstReceiptMicroseconds, let last = result.lastReceiptMicroseconds, last > first else { return nil }
        return Double(result.received) / (Double(last - first) / 1e6)
    }

    /// Rows the writer committed per second.
    var eventsPerSecondWritten: Double? {
        writerTPS.map { $0 * Double(rowsPerTransaction ?? 1) }
    }

    /// pgherald's CPU seconds per 1000 deliveries.
    var daemonCPUPerThousand: Double? {
        guard let cpu = daemonCPUSeconds, result.received > 0 else { return nil }
        return cpu / Double(result.received) * 1000
    }

    /// Fraction of one core the load client used while events arrived.
    var clientCPUShare: Double {
        result.clientCPUSeconds / max(result.clientWallSeconds, 1e-9)
    }
}

extension BenchResults.WriteOverhead {
    /// The median over rounds of each trigger's TPS divided by the minimal
    /// trigger's TPS in the same round.
    func medianRatio(_ trigger: String, to floor: String = "minimal") -> Double? {
        guard let variant = variants.first(where: { $0.trigger == trigger }),
              let base = variants.first(where: { $0.trigger == floor }) else { return nil }
        return median(zip(variant.tps, base.tps).map { $0 / $1 })
    }

    func medianTPS(_ trigger: String) -> Double? {
        variants.first { $0.trigger == trigger }.flatMap { median($0.tps) }
    }
}

func median(_ values: [Double]) -> Double? {
    guard !values.isEmpty else { return nil }
    return values.sorted()[(values.count - 1) / 2]
}
