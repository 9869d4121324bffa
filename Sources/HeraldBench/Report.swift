import ArgumentParser
import Foundation

/// Prints a results file as Markdown tables, each figure next to its target.
struct Report: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print a results file from scripts/bench as Markdown.")

    @Argument(help: "bench/results/<date>.json")
    var file: String

    func run() throws {
        let results = try JSONDecoder().decode(BenchResults.self, from: Data(contentsOf: URL(fileURLWithPath: file)))
        print(MarkdownReport(results).text)
    }
}

/// The Markdown tables for one results file.
struct MarkdownReport {
    let results: BenchResults
    private(set) var text = ""

    init(_ results: BenchResults) {
        self.results = results
        line("pgherald benchmark, \(results.date) (\(results.mode)): \(results.machine), PostgreSQL \(results.postgres), fsync on.")
        line("PostgreSQL, pgherald and the load clients share the machine.")
        targets()
        writeOverhead()
        throughput()
        latency()
        baseline()
        idle()
        burst()
        eventLog()
        webhooks()
        nats()
        liveQueries()
        transactions()
        console()
        kernelFloor()
        accessControl()
        twoDaemons()
        beyondOneMachine()
        realtime()
        rowSecurity()
        network()
        ingestion()
        underAttack()
        sideBySide()
        restartHerd()
        manyStreams()
        writers()
    }

    /// Each run's label once, in the order the runs came.
    static func labelsInOrder(_ runs: [BenchResults.Run]) -> [String] {
        runs.reduce(into: [String]()) { if !$0.contains($1.result.label) { $0.append($1.result.label) } }
    }

    private mutating func line(_ text: String = "") {
        self.text += text + "\n"
    }

    private mutating func table(_ header: [String], _ rows: [[String]]) {
        line("| " + header.joined(separator: " | ") + " |")
        line("|" + String(repeating: "---|", count: header.count))
        for row in rows { line("| " + row.joined(separator: " | ") + " |") }
        line()
    }

    private func run(_ scenario: String, subscribers: Int) -> BenchResults.Run? {
        results.runs(scenario).first { $0.result.subscribers == subscribers }
    }

    // MARK: Targets

    private mutating func targets() {
        line()
        line("### Targets")
        line()
        var rows: [[String]] = []
        let ratios = results.runs.map(\.result.deliveredRatio)
        rows.append(["delivered ratio, every scenario", "1.0", ratios.isEmpty ? "-" : "\(format(ratios.min()!, 4)) lowest", verdict(ratios.allSatisfy { $0 == 1 })])
        if let pgherald = run("throughput", subscribers: 1), let bare = results.runs("baseline").first(where: { $0.rate == nil }),
           let ours = pgherald.deliveriesPerSecond, let theirs = bare.deliveriesPerSecond {
            let ratio = ours / theirs
            rows.append(["1 subscriber vs bare LISTEN: throughput", "0.95 or more", format(ratio, 2), verdict(ratio >= 0.95)])
        }
        if let pgherald = run("latency", subscribers: 1)?.result.latencyMilliseconds,
           let bare = results.runs("baseline").first(where: { $0.rate != nil })?.result.latencyMilliseconds {
            let extra = pgherald.p99 - bare.p99
            rows.append(["1 subscriber vs bare LISTEN: p99 at 1000/s", "within +1 ms", "\(signed(extra)) ms", verdict(extra <= 1)])
        }
        for (subscribers, target) in [(100, 5.0), (1000, 20.0)] {
            let rounds = results.runs("latency").filter { $0.result.subscribers == subscribers && $0.rate == 1000 }
            if let p99 = median(rounds.compactMap { $0.result.latencyMilliseconds?.p99 }) {
                rows.append(["1000 events/s, \(subscribers) subscribers: p99", "under \(format(target, 0)) ms", "\(format(p99, 1)) ms", verdict(p99 < target)])
            }
        }
        let fanOut = results.runs("throughput").compactMap(\.deliveriesPerSecond).max()
        if let fanOut {
            rows.append(["aggregate fan-out", "300,000 deliveries/s or more", "\(grouped(fanOut))/s", verdict(fanOut >= 300_000)])
        }
        speedRoundThree(&rows)
        if let overhead = results.writeOverhead {
            for (trigger, name, target) in [("notify", "notify-only", 0.9), ("durable", "durable", 0.85),
                                            ("notify_native", "notify-only, native", 0.9), ("durable_native", "durable, native", 0.85)] {
                guard let ratio = overhead.medianRatio(trigger) else { continue }
                rows.append(["write overhead, \(name)", "\(format(target, 2)) of minimal NOTIFY or more", format(ratio, 2), verdict(ratio >= target)])
            }
        }
        for (trigger, name) in [("durable", "durable"), ("durable_native", "durable, native")] {
            if let bulk = results.bulkStatements?.medianRatio(trigger, rows: 100_000) {
                rows.append(["100,000-row INSERT ... SELECT, \(name)", "2.0 times no trigger or less", format(bulk, 2), verdict(bulk <= 2)])
            }
        }
        table(["scenario", "target", "measured", "met"], rows)
    }

    /// The targets of speed round 3: latency and CPU per delivery at c.'s
    /// fan-outs, one subscriber against bare LISTEN, the burst, an idle
    /// stream and a one-subscriber daemon's memory.
    private func speedRoundThree(_ rows: inout [[String]]) {
        // c. runs each shape in rounds: each figure is the median over them.
        func rounds(_ subscribers: Int, _ rate: Int) -> [BenchResults.Run] {
            results.runs("latency").filter { $0.result.subscribers == subscribers && $0.rate == rate }
        }
        func medianOf(_ runs: [BenchResults.Run], _ figure: (BenchResults.Run) -> Double?) -> Double? {
            median(runs.compactMap(figure))
        }
        let shapes = [(100, 1000, "100 subscribers × 1000/s"), (1000, 100, "1000 subscribers × 100/s")]
        for (subscribers, rate, name) in shapes {
            let runs = rounds(subscribers, rate)
            guard !runs.isEmpty else { continue }
            let over = runs.count > 1 ? ", median of \(runs.count)" : ""
            if subscribers == 1000, let p50 = medianOf(runs, { $0.result.latencyMilliseconds?.p50 }) {
                rows.append(["\(name): p50", "4 ms or less", "\(format(p50, 1)) ms\(over)", verdict(p50 <= 4)])
            }
            let ceiling = subscribers == 1000 ? 10.0 : 4.0
            if let p99 = medianOf(runs, { $0.result.latencyMilliseconds?.p99 }) {
                rows.append(["\(name): p99", "\(format(ceiling, 0)) ms or less", "\(format(p99, 1)) ms\(over)", verdict(p99 <= ceiling)])
            }
            if let cost = medianOf(runs, { $0.daemonCPUPerThousand.map { $0 * 1000 } }) {
                rows.append(["\(name): daemon CPU per delivery", "2 µs or less", "\(format(cost, 1)) µs\(over)", verdict(cost <= 2)])
            }
        }
        if let ours = run("throughput", subscribers: 1)?.result.latencyMilliseconds?.p99,
           let bare = results.runs("baseline").first(where: { $0.rate == nil })?.result.latencyMilliseconds?.p99, bare > 0 {
            let ratio = ours / bare
            rows.append(["1 subscriber at full speed vs bare LISTEN: p99", "within 10 %", "\(format(ours, 1)) ms against \(format(bare, 1)) ms", verdict(ratio <= 1.1)])
        }
        if let burst = results.runs("burst").max(by: { $0.result.subscribers < $1.result.subscribers }) {
            var elapsed = "-"
            if let committed = burst.commitEndMicroseconds, let last = burst.result.lastReceiptMicroseconds {
                elapsed = "\(format(Double(last - committed) / 1e6, 2)) s from commit to the last"
            }
            rows.append([
                "\(burst.result.subscribers) subscribers, one \(grouped(Double(burst.committed)))-row statement", "every row to every subscriber",
                "\(format(burst.result.deliveredRatio, 4)), \(elapsed)", verdict(burst.result.deliveredRatio == 1),
            ])
        }
        if let perSubscriber = idleBytesPerSubscriber {
            rows.append(["idle stream", "8 KiB or less", "\(format(perSubscriber / 1024, 1)) KiB", verdict(perSubscriber <= 8 * 1024)])
        }
        if let resident = run("throughput", subscribers: 1)?.daemonRSSKiB {
            let megabytes = Double(resident) * 1024 / 1e6
            rows.append(["one-subscriber daemon, resident", "40 MB or less", "\(format(megabytes, 1)) MB", verdict(megabytes <= 40)])
        }
    }

    // MARK: Scenarios

    private mutating func writeOverhead() {
        guard let overhead = results.writeOverhead else { return }
        let rounds = overhead.variants.first?.tps.count ?? 0
        line("### a. Write overhead")
        line()
        line("pgbench, \(overhead.clients) clients, single-row INSERTs of about 100 B, \(overhead.seconds) s per run, \(rounds) rounds interleaved, `synchronous_commit` off so that the triggers' CPU decides. No daemon listens.")
        line()
        table(["trigger", "median TPS", "ratio to minimal (median of rounds)"], overhead.variants.map { variant in
            [Self.triggerNames[variant.trigger] ?? variant.trigger, grouped(overhead.medianTPS(variant.trigger) ?? 0),
             overhead.medianRatio(variant.trigger).map { format($0, 2) } ?? "-"]
        })
        guard let bulk = results.bulkStatements else { return }
        line("Bulk statements: one client, one `INSERT ... SELECT` of N rows of about 100 B per transaction; milliseconds per statement (median of rounds), and in brackets the time over no trigger's.")
        line()
        let triggers = ["none", "notify", "durable", "notify_native", "durable_native", "row"].filter { trigger in bulk.variants.contains { $0.trigger == trigger } }
        table(["rows per statement"] + triggers.map { Self.triggerNames[$0] ?? $0 }, bulk.sizes.map { rows in
            ["\(grouped(Double(rows)))"] + triggers.map { trigger in
                guard let milliseconds = bulk.medianMilliseconds(trigger, rows: rows) else { return "-" }
                let ratio = trigger == "none" ? "" : bulk.medianRatio(trigger, rows: rows).map { " (\(format($0, 2))×)" } ?? ""
                return format(milliseconds, milliseconds < 10 ? 3 : 1) + ratio
            }
        })
    }

    /// Scenario l.: what each trigger costs many writers at once, and how
    /// soon their events arrive. Each figure is the median of its rounds; a
    /// round's ratio is to no trigger's run of the same round.
    private mutating func writers() {
        let runs = results.runs("writers")
        guard let baseline = results.writersWithoutTrigger, !runs.isEmpty else { return }
        let counts = baseline.map(\.writers)
        // A label begins with the durability and the trigger kind: "durable native, 16 writers, round 2".
        let kinds = runs.map { String($0.result.label.prefix { $0 != "," }) }.reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
        let rounds = { (kind: String, writers: Int) in runs.filter { $0.result.label.hasPrefix(kind + ",") && $0.writers == writers } }
        let ratio = { (kind: String, base: BenchResults.WriterBaseline) -> Double? in
            median(rounds(kind, base.writers).compactMap { run in
                guard let tps = run.writerTPS else { return nil }
                let round = run.result.label.firstMatch(of: /round (\d+)$/).flatMap { Int($0.1) } ?? 1
                return tps / base.tps(inRound: round)
            })
        }
        let roundCount = baseline.first?.rounds?.count ?? 1
        line("### l. Writers: many at once, `synchronous_commit` on")
        line()
        line("pgbench single-row INSERTs of about 100 B at full speed, each trigger in a database of its own with a daemon listening and one SSE subscriber; \(roundCount) round(s), no trigger measured in each just before the triggers, every run after a `CHECKPOINT`. TPS (median of rounds), and in brackets the median of each round's ratio to no trigger. Targets: durable at least 0.8 of no trigger at 1 writer and 0.75 at 16 and 64.")
        line()
        table(["trigger"] + counts.map { "\($0) writers" }, [["no trigger"] + baseline.map { grouped($0.tps) }] + kinds.map { kind in
            [kind] + baseline.map { base in
                guard let tps = median(rounds(kind, base.writers).compactMap(\.writerTPS)), let ratio = ratio(kind, base) else { return "-" }
                return "\(grouped(tps)) (\(format(ratio, 2)))"
            }
        })
        if let references = results.writersReferences, !references.isEmpty {
            line("References, with no daemon and no subscriber, measured in the same rounds: TPS (median of rounds) and the median of each round's ratio to no trigger.")
            line()
            table(["reference"] + counts.map { "\($0) writers" }, references.map { reference in
                [reference.label] + baseline.map { base in
                    guard let measured = reference.counts.first(where: { $0.writers == base.writers }) else { return "-" }
                    let ratios = (measured.rounds ?? [measured.tps]).enumerated().map { $1 / base.tps(inRound: $0 + 1) }
                    return "\(grouped(measured.tps)) (\(median(ratios).map { format($0, 2) } ?? "-"))"
                }
            })
        }
        table(["trigger", "writers", "delivered ratio", "p50 ms", "p99 ms", "max ms", "commits' own p99 ms", "pgherald CPU s / 1000"], kinds.flatMap { kind in
            [counts.first, counts.last].compactMap { $0 }.compactMap { writers in
                let measured = rounds(kind, writers)
                guard !measured.isEmpty else { return nil }
                let latencies = [\LoadResult.Latency.p50, \.p99, \.max].map { figure in
                    median(measured.compactMap { $0.result.latencyMilliseconds?[keyPath: figure] }).map { format($0, 2) } ?? "-"
                }
                return [kind, "\(writers)", format(measured.map(\.result.deliveredRatio).min() ?? 0, 4)] + latencies
                    + [median(measured.compactMap(\.commitLatencyMilliseconds?.p99)).map { format($0, 2) } ?? "-"]
                    + [median(measured.compactMap(\.daemonCPUPerThousand)).map { format($0, 3) } ?? "-"]
            }
        })
    }

    private static let triggerNames = [
        "none": "no trigger", "minimal": "minimal pg_notify trigger", "notify": "pgherald notify-only",
        "durable": "pgherald durable", "notify_native": "pgherald notify-only, native", "durable_native": "pgherald durable, native",
        "row": "pgherald durable, per-row trigger",
    ]

    private mutating func throughput() {
        let runs = results.runs("throughput")
        guard !runs.isEmpty else { return }
        line("### b. Throughput: full-speed writer")
        line()
        table(
            ["subscribers", "committed", "writer TPS", "delivered ratio", "deliveries/s", "pgherald CPU s / 1000 deliveries", "client CPU (cores)", "p50 ms", "p99 ms"],
            runs.map { run in
                [
                    "\(run.result.subscribers)", "\(run.committed)", run.writerTPS.map { grouped($0) } ?? "-",
                    format(run.result.deliveredRatio, 4), run.deliveriesPerSecond.map { grouped($0) } ?? "-",
                    run.daemonCPUPerThousand.map { format($0, 3) } ?? "-", format(run.clientCPUShare, 2),
                    milliseconds(run, \.p50),
                    milliseconds(run, \.p99),
                ]
            }
        )
    }

    private mutating func latency() {
        let runs = results.runs("latency")
        guard !runs.isEmpty else { return }
        line("### c. Latency: writer at a fixed rate, commit to receipt")
        line()
        line("Latency is receipt minus the event's `at`, taken by the trigger just before commit: an upper bound on commit to receipt.")
        line()
        table(
            ["subscribers", "events/s", "delivered ratio", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "commits' own p99 / max ms", "pgherald CPU s / 1000", "client CPU (cores)"],
            runs.map { run in
                [
                    "\(run.result.subscribers)", run.rate.map(String.init) ?? "full speed", format(run.result.deliveredRatio, 4),
                    milliseconds(run, \.p50), milliseconds(run, \.p99),
                    milliseconds(run, \.p999), milliseconds(run, \.max), commitLatency(run),
                    run.daemonCPUPerThousand.map { format($0, 3) } ?? "-", format(run.clientCPUShare, 2),
                ]
            }
        )
    }

    private mutating func baseline() {
        let bare = results.runs("baseline")
        guard !bare.isEmpty else { return }
        line("### d. Baseline: one bare libpq LISTEN client against one pgherald subscriber")
        line()
        line("The same trigger and writer; the bare client LISTENs on the channel itself, with pgherald stopped.")
        line()
        var compared: [BenchResults.Run] = []
        for run in bare {
            compared.append(run)
            let scenario = run.rate == nil ? "throughput" : "latency"
            if let ours = self.run(scenario, subscribers: 1) { compared.append(ours) }
        }
        table(
            ["client", "events/s", "writer TPS", "deliveries/s", "p50 ms", "p99 ms", "max ms"],
            compared.map { run in
                [
                    run.result.scenario == "baseline" ? "bare libpq LISTEN" : "pgherald, 1 SSE subscriber",
                    run.rate.map(String.init) ?? "full speed", run.writerTPS.map { grouped($0) } ?? "-",
                    run.deliveriesPerSecond.map { grouped($0) } ?? "-",
                    milliseconds(run, \.p50),
                    milliseconds(run, \.p99),
                    milliseconds(run, \.max),
                ]
            }
        )
    }

    private var idleBytesPerSubscriber: Double? {
        let idle = results.runs("idle")
        guard let empty = idle.first(where: { $0.result.subscribers == 0 })?.daemonRSSKiB,
              let full = idle.max(by: { $0.result.subscribers < $1.result.subscribers }),
              full.result.subscribers > 0, let rss = full.daemonRSSKiB else { return nil }
        return Double(rss - empty) * 1024 / Double(full.result.subscribers)
    }

    private mutating func idle() {
        let idle = results.runs("idle")
        guard !idle.isEmpty else { return }
        line("### e. Idle fan-out memory")
        line()
        table(["SSE subscribers", "pgherald RSS"], idle.map { run in
            ["\(grouped(Double(run.result.subscribers)))", run.daemonRSSKiB.map { "\(format(Double($0) / 1024, 1)) MiB" } ?? "-"]
        })
        if let perSubscriber = idleBytesPerSubscriber {
            line("About \(format(perSubscriber / 1024, 1)) KiB per idle subscriber.")
            line()
        }
    }

    private mutating func burst() {
        let bursts = results.runs("burst")
        guard !bursts.isEmpty else { return }
        line("### f. Burst: one transaction that inserts \(grouped(Double(bursts[0].committed))) rows")
        line()
        table(
            ["subscribers", "delivered ratio", "commit to last subscriber complete", "overflows, then resumed", "pgherald peak RSS"],
            bursts.map { run in
                var elapsed = "-"
                if let committed = run.commitEndMicroseconds, let last = run.result.lastReceiptMicroseconds {
                    elapsed = "\(format(Double(last - committed) / 1e6, 2)) s"
                }
                return [
                    "\(run.result.subscribers)", format(run.result.deliveredRatio, 4), elapsed,
                    "\(run.result.overflows)", run.daemonPeakRSSKiB.map { "\(format(Double($0) / 1024, 1)) MiB" } ?? "-",
                ]
            }
        )
    }

    /// The same full-speed load without the event log, and with it durable and live, side by side.
    private mutating func eventLog() {
        let logged = results.runs("eventlog")
        guard let first = logged.first else { return }
        line("### g. Event log: the same load with and without it")
        line()
        line("Full-speed writer, \(first.result.subscribers) SSE subscribers; the event log with `sync: interval` (1 s), durable (its own journal cursor, the default) and live.")
        line()
        let without = run("throughput", subscribers: first.result.subscribers)
        let named = [(without, "without the event log")] + logged.map { run -> (BenchResults.Run?, String) in
            (run, run.result.label.contains("live") ? "with the event log, live" : "with the event log, durable")
        }
        table(
            ["run", "committed", "delivered ratio", "deliveries/s", "p50 ms", "p99 ms", "pgherald CPU s / 1000 deliveries", "lines in the log"],
            named.compactMap { run, name in
                run.map { run in
                    [
                        name, "\(run.committed)", format(run.result.deliveredRatio, 4), run.deliveriesPerSecond.map { grouped($0) } ?? "-",
                        milliseconds(run, \.p50), milliseconds(run, \.p99), run.daemonCPUPerThousand.map { format($0, 3) } ?? "-",
                        run.eventLogLines.map { "\($0)" } ?? "-",
                    ]
                }
            }
        )
    }

    /// The NATS output beside one SSE subscriber, from the same run.
    private mutating func nats() {
        guard let run = results.runs("nats").first, let nats = run.nats else { return }
        line("### n. NATS JetStream")
        line()
        line("Full-speed writer; the `nats:` output publishing to a local `nats-server -js` (one stream, acknowledgements awaited, 256 in flight), a nats-py subscriber on `pgherald.>` and one SSE subscriber, from the same run. Latency is receipt minus the event's `at`.")
        line()
        let cpu = run.daemonCPUSeconds.map { format($0 * 1_000_000 / Double(max(run.committed, 1)), 1) } ?? "-"
        table(
            ["path", "committed", "received", "events/s", "p50 ms", "p99 ms", "pgherald CPU µs / event (both paths)"],
            [
                ["SSE, 1 subscriber", "\(run.committed)", "\(run.result.received)", run.deliveriesPerSecond.map { grouped($0) } ?? "-",
                 milliseconds(run, \.p50), milliseconds(run, \.p99), cpu],
                ["NATS JetStream, acknowledged \(nats.acknowledged.map(String.init) ?? "-")", "\(run.committed)", "\(nats.received)",
                 nats.seconds > 0 ? grouped(Double(nats.received) / nats.seconds) : "-",
                 nats.p50Milliseconds.map { format($0, 2) } ?? "-", nats.p99Milliseconds.map { format($0, 2) } ?? "-", cpu],
            ]
        )
    }

    /// One query's result for many apps: a live query against the seed apps' pattern.
    private mutating func liveQueries() {
        let runs = results.runs("livequery")
        guard !runs.isEmpty else { return }
        line("### o. Live queries")
        line()
        line("Apps showing `select id, n, written_us from bench_live` (ten rows) while two writers update it at 200 transactions/s. *shared*: each follows `GET /queries/bench_live`, which the daemon runs once per burst; *seed*: each follows `/events?table=bench_live` and runs the query itself on its own connection at every change notice, as the seed apps do (1000 such apps would need 1000 connections). Latency is a result's receipt minus `written_us`, set with `clock_timestamp()` just before commit, for every row the result changed.")
        line()
        table(
            ["run", "transactions written", "results received", "queries PostgreSQL ran", "queries/s", "p50 ms", "p99 ms", "pgherald CPU s", "load client CPU s"],
            runs.map { run in
                let figures = run.liveQueries
                let perSecond = figures.map { $0.seconds > 0 ? format(Double($0.queriesRun) / Double($0.seconds), 1) : "-" } ?? "-"
                return [
                    run.result.label, "\(run.committed)", "\(run.result.received)", figures.map { "\($0.queriesRun)" } ?? "-", perSecond,
                    milliseconds(run, \.p50), milliseconds(run, \.p99), run.daemonCPUSeconds.map { format($0, 2) } ?? "-",
                    format(run.result.clientCPUSeconds, 2),
                ]
            }
        )
    }

    /// The same load per event and per commit (`group=transaction`).
    private mutating func transactions() {
        let runs = results.runs("transactions")
        guard !runs.isEmpty else { return }
        line("### p. Whole transactions: one message per commit")
        line()
        line("100 subscribers while writers commit 10-row transactions at 100/s: per event (`GET /events`), then one message per commit (`GET /events?group=transaction`), each message checked to hold its transaction's 10 rows in order. Latency is each row's receipt minus its `at`.")
        line()
        table(
            ["run", "delivered ratio", "rows delivered/s", "p50 ms", "p99 ms", "pgherald CPU s / 1000 rows delivered", "failed streams"],
            runs.map { run in
                deliveryColumns(run) + [
                    run.daemonCPUPerThousand.map { format($0, 4) } ?? "-",
                    run.result.failedStreams == 0 ? "0" : "\(run.result.failedStreams): \(run.result.firstFailure ?? "")",
                ]
            }
        )
    }

    /// A run's label, delivered ratio, deliveries per second, p50 and p99: the first columns of p. and q.
    private func deliveryColumns(_ run: BenchResults.Run) -> [String] {
        [
            run.result.label, format(run.result.deliveredRatio, 4), run.deliveriesPerSecond.map { grouped($0) } ?? "-",
            milliseconds(run, \.p50), milliseconds(run, \.p99),
        ]
    }

    /// The kernel's cost of c.'s writes with nothing else done, beside what pgherald spent per delivery in c.
    private mutating func kernelFloor() {
        guard let floor = results.floor, !floor.isEmpty else { return }
        line("### r. The kernel's floor: one write and one reader wake-up")
        line()
        line("`bench/floor.c` writes a frame to each of N Unix stream sockets per event, at c.'s rates, with nothing else done; one epoll reader reads them, as the load client does. Beside it, what pgherald spent per delivery in c. with the same shape.")
        line()
        table(
            ["shape", "frame bytes", "writer µs per write", "reader µs per read", "pgherald µs per delivery (c.)", "pgherald / writer floor"],
            floor.map { measured in
                let ours = results.runs("latency").first { $0.result.subscribers == measured.sockets && $0.rate == measured.eventsPerSecond }
                let perDelivery = ours?.daemonCPUPerThousand.map { $0 * 1000 }
                return [
                    "\(measured.sockets) sockets × \(measured.eventsPerSecond) events/s", "\(measured.frameBytes)",
                    format(measured.writerMicrosecondsPerWrite, 2), format(measured.readerMicrosecondsPerRead, 2),
                    perDelivery.map { format($0, 2) } ?? "-",
                    perDelivery.map { format($0 / measured.writerMicrosecondsPerWrite, 1) + "×" } ?? "-",
                ]
            }
        )
    }

    /// c.'s 100-subscriber run with and without ten consoles open.
    private mutating func console() {
        let runs = results.runs("console")
        guard !runs.isEmpty else { return }
        line("### q. The console: what ten open pages cost")
        line()
        line("c.'s 100 subscribers at 1000 events/s, then the same with ten consoles open beside them: each page is one more `/events` stream and one `GET /console/state` a second.")
        line()
        table(
            ["run", "delivered ratio", "deliveries/s", "p50 ms", "p99 ms", "pgherald CPU s", "pgherald CPU s / 1000 deliveries"],
            runs.map { run in
                deliveryColumns(run) + [run.daemonCPUSeconds.map { format($0, 2) } ?? "-", run.daemonCPUPerThousand.map { format($0, 4) } ?? "-"]
            }
        )
    }

    /// One webhook endpoint at full speed, and the socket's latency beside a failing endpoint.
    private mutating func webhooks() {
        let runs = results.runs("webhook")
        guard !runs.isEmpty else { return }
        line("### h. Webhooks")
        line()
        line("Full-speed writer, one endpoint (concurrency 32) on a local NIO receiver that verifies every signature. Latency is receipt minus the event's `at`; deliveries/s from the first receipt to the last.")
        line()
        table(
            ["run", "committed", "events/s written", "delivered ratio", "deliveries/s (target 5,000)", "p50 ms", "p99 ms", "repeats", "bad signatures", "pgherald CPU µs / delivery"],
            runs.map { delivered in
                [
                    delivered.result.label, "\(delivered.committed)", delivered.eventsPerSecondWritten.map { grouped($0) } ?? "-",
                    format(delivered.result.deliveredRatio, 4),
                    delivered.deliveriesPerSecond.map { "\(grouped($0)) \($0 >= 5000 ? "(met)" : "(**not met**)")" } ?? "-",
                    milliseconds(delivered, \.p50), milliseconds(delivered, \.p99), "\(delivered.result.duplicatedOrReordered)",
                    "\(delivered.result.failedStreams)", delivered.daemonCPUPerThousand.map { format($0 * 1000, 1) } ?? "-",
                ]
            }
        )
        guard let failing = results.runs("webhook-failing").first else { return }
        line("Socket subscribers with and without a failing endpoint (every request answered 503) on the same daemon:")
        line()
        let without = results.runs("latency").first { $0.result.subscribers == failing.result.subscribers }
        table(
            ["run", "delivered ratio", "p50 ms", "p99 ms", "pgherald CPU s / 1000 deliveries"],
            [(without, "without webhooks"), (failing, "with a failing endpoint")].compactMap { run, name in
                run.map { run in
                    [
                        "\(run.result.subscribers) subscribers, \(run.rate.map { "\(grouped(Double($0))) events/s" } ?? "full speed"), \(name)",
                        format(run.result.deliveredRatio, 4), milliseconds(run, \.p50), milliseconds(run, \.p99),
                        run.daemonCPUPerThousand.map { format($0, 3) } ?? "-",
                    ]
                }
            }
        )
    }

    /// The 100-subscriber runs under a 20-rule access section beside the same runs without one.
    private mutating func accessControl() {
        let runs = results.runs("access")
        guard !runs.isEmpty else { return }
        line("### i. Access control: the same load under a 20-rule `access:` section")
        line()
        line("The subscribers run as a user that one of 20 rules grants (a table pattern, two operations, a condition on the row); without the section, the same runs of b. and c. as root.")
        line()
        var rows: [[String]] = []
        for run in runs {
            let open = results.runs(run.rate == nil ? "throughput" : "latency").first {
                $0.result.subscribers == run.result.subscribers && $0.rate == run.rate && $0.payloadBytes == run.payloadBytes
            }
            for (measured, name) in [(open, "open"), (run, "20 rules")] {
                guard let measured else { continue }
                rows.append([
                    "\(measured.result.subscribers) subscribers, \(measured.rate.map { "\(grouped(Double($0))) events/s" } ?? "full speed"), \(name)",
                    format(measured.result.deliveredRatio, 4), measured.deliveriesPerSecond.map { grouped($0) } ?? "-",
                    milliseconds(measured, \.p50), milliseconds(measured, \.p99), measured.daemonCPUPerThousand.map { format($0, 3) } ?? "-",
                ])
            }
        }
        table(["run", "delivered ratio", "deliveries/s", "p50 ms", "p99 ms", "pgherald CPU s / 1000 deliveries"], rows)
    }

    // MARK: Formatting

    /// One latency figure of a run, or "-" when nothing arrived.
    private func milliseconds(_ run: BenchResults.Run, _ figure: KeyPath<LoadResult.Latency, Double>) -> String {
        run.result.latencyMilliseconds.map { format($0[keyPath: figure], 2) } ?? "-"
    }

    /// The writer's own commits, p99 and max: what of an event's latency was the commit's.
    private func commitLatency(_ run: BenchResults.Run) -> String {
        run.commitLatencyMilliseconds.map { "\(format($0.p99, 2)) / \(format($0.max, 2))" } ?? "-"
    }

    private func verdict(_ met: Bool) -> String { met ? "yes" : "**no**" }

    private func format(_ value: Double, _ digits: Int) -> String {
        String(format: "%.\(digits)f", value)
    }

    private func signed(_ value: Double) -> String {
        String(format: "%+.2f", value)
    }

    private func grouped(_ value: Double) -> String {
        let digits = String(Int(value.rounded()))
        var result = ""
        for (index, character) in digits.reversed().enumerated() {
            if index > 0, index % 3 == 0 { result.append(",") }
            result.append(character)
        }
        return String(result.reversed())
    }
}

extension MarkdownReport {
    /// j.: one load client per daemon; the daemons' CPU for the whole run rides on the first.
    private mutating func twoDaemons() {
        let runs = results.runs("two-daemons")
        guard !runs.isEmpty else { return }
        line("### j. Two daemons: 1000 subscribers at 100 events/s, on one daemon and split over two")
        line()
        line("Both daemons on this machine and database (two `--name`s), each with its own load client; the daemons' CPU is summed.")
        line()
        let labels = Self.labelsInOrder(runs)
        table(["run", "subscribers each", "delivered ratio", "daemons' CPU s", "µs per delivery", "p50 ms", "p99 ms"], labels.map { label in
            let clients = runs.filter { $0.result.label == label }
            let cpu = clients.compactMap(\.daemonCPUSeconds).reduce(0, +)
            let received = clients.map(\.result.received).reduce(0, +)
            return [
                label, "\(clients.first?.result.subscribers ?? 0)",
                format(clients.map(\.result.deliveredRatio).min() ?? 0, 4),
                format(cpu, 2), received > 0 ? format(cpu / Double(received) * 1e6, 2) : "-",
                clients.compactMap { $0.result.latencyMilliseconds.map { format($0.p50, 1) } }.joined(separator: ", "),
                clients.compactMap { $0.result.latencyMilliseconds.map { format($0.p99, 1) } }.joined(separator: ", "),
            ]
        })
    }
}

extension MarkdownReport {
    /// v.: j.'s fan-out from one daemon, then through two edges that a database daemon feeds through NATS.
    private mutating func beyondOneMachine() {
        let runs = results.runs("beyond-one-machine")
        guard !runs.isEmpty else { return }
        line("### v. Beyond one machine: one daemon, then a database daemon feeding two edges through NATS")
        line()
        line("At 100 events/s, 1000 subscribers on one daemon, then 500 on each edge; at full speed, one subscriber per member. "
            + "The edges (`source: nats`) read the stream that the database daemon's `nats` output fills through a local nats-server; "
            + "every member, nats-server and PostgreSQL share this machine's cores. CPU per delivery is each member's CPU over the deliveries it made; "
            + "for the database daemon (which serves no subscriber here) and nats-server, over the events.")
        line()
        let labels = Self.labelsInOrder(runs)
        var costs: [String: [String: Double]] = [:]
        table(["run", "delivered ratio", "deliveries/s", "p99 ms", "journal scans/s", "CPU µs per delivery or event"], labels.map { label in
            let clients = runs.filter { $0.result.label == label }
            let received = clients.map(\.result.received).reduce(0, +)
            let seconds = clients.first?.runSeconds ?? 1
            let committed = Double(clients.first?.committed ?? 0)
            let members = clients.first?.memberCPUSeconds ?? [:]
            let edges = members.keys.filter { $0.hasPrefix("edge") }.count
            var shown: [String] = []
            for (name, cpu) in members.sorted(by: { $0.key < $1.key }) {
                let each = name.hasPrefix("edge") ? Double(received) / Double(max(1, edges)) : (name == "db" || name == "nats-server" ? committed : Double(received))
                guard each > 0 else { continue }
                costs[label, default: [:]][name] = cpu / each * 1e6
                shown.append("\(name) \(format(cpu / each * 1e6, 2))")
            }
            return [
                label, format(clients.map(\.result.deliveredRatio).min() ?? 0, 4), grouped(Double(received) / seconds),
                clients.compactMap { $0.result.latencyMilliseconds.map { format($0.p99, 1) } }.joined(separator: ", "),
                clients.first?.journalScans.map { format(Double($0) / seconds, 1) } ?? "-", shown.joined(separator: "; "),
            ]
        })
        let fanOut = costs.first { $0.key.contains("edges") && !$0.key.contains("full speed") && !$0.key.contains("statements") }?.value
        let edgeCosts = fanOut?.filter { $0.key.hasPrefix("edge") }.map(\.value) ?? []
        guard !edgeCosts.isEmpty else { return }
        let edgeCost = edgeCosts.reduce(0, +) / Double(edgeCosts.count)
        let perEdge = 1.4 / edgeCost * 1e6
        line()
        var text = "Per member: an edge spends \(format(edgeCost, 2)) µs of CPU per delivery, so a 2-core edge kept at 70 % carries about "
            + "\(grouped(perEdge)) deliveries/s, and 10 such edges about \(grouped(perEdge * 10)). PostgreSQL's reads of the journal do not grow "
            + "with the edges: they are the database daemon's (its listener, its `nats` output's feed, and the ticks that confirm live deliveries for that feed)."
        if let full = costs.first(where: { $0.key.contains("edges") && $0.key.contains("full speed") })?.value, let nats = full["nats-server"] {
            // One publish in and two deliveries out per event here: about a third of it per message.
            let perMessage = nats / 3
            text += " At full speed nats-server spent \(format(nats, 2)) µs per event (one publish in, one delivery to each of 2 edges), about "
                + "\(format(perMessage, 2)) µs a message; an event to 10 edges is 11 messages, \(format(perMessage * 11, 1)) µs, so one NATS core "
                + "carries about \(grouped(1e6 / (perMessage * 11))) events/s to 10 edges."
            if let database = full["db"] { text += " The database daemon spent \(format(database, 2)) µs per event, reading the journal twice and publishing." }
        }
        text += " Centrifugo's published run: 500,000 deliveries/s on 20 pods of about 2 CPUs, 25,000 per pod, with 1M WebSocket connections."
        line(text)
        let bulkEdges = costs.first { $0.key.contains("edges") && $0.key.contains("statements") }?.value.filter { $0.key.hasPrefix("edge") }.map(\.value) ?? []
        if !bulkEdges.isEmpty {
            let intake = bulkEdges.reduce(0, +) / Double(bulkEdges.count)
            var bulk = "\nIn 10,000-row statements, where each read brings many events, an edge took an event in and delivered it to its one subscriber for "
                + "\(format(intake, 2)) µs (goal ≤ 10: \(verdict(intake <= 10)))"
            if let database = costs.first(where: { $0.key.hasPrefix("one daemon") && $0.key.contains("statements") })?.value["daemon"] {
                bulk += ", against \(format(database, 2)) µs for a database daemon reading the same from the journal"
            }
            line(bulk + ".")
        }
    }
}

extension MarkdownReport {
    /// k.: Supabase Realtime WebSocket clients beside SSE streams at the same load; the goal is p99 within 1.5× of SSE's.
    private mutating func realtime() {
        let runs = results.runs("realtime")
        guard !runs.isEmpty else { return }
        line("### k. Supabase Realtime: 100 WebSocket clients at 1000 events/s, beside 100 SSE subscribers, and at 1000 database broadcasts/s")
        line()
        line("One daemon, the runs one after the other. WebSocket latencies are measured from `commit_timestamp`, which has millisecond resolution, so they read up to 1 ms high; a broadcast's is taken inside its transaction with `clock_timestamp()`.")
        line()
        let sse = runs.first { $0.result.label.contains("SSE") }
        table(["run", "delivered ratio", "p50 ms", "p99 ms", "p99 ÷ SSE's", "pgherald CPU s / 1000 deliveries"], runs.map { run in
            let ratio = sse.flatMap { sse in
                run.result.latencyMilliseconds.flatMap { own in sse.result.latencyMilliseconds.map { own.p99 / $0.p99 } }
            }
            return [
                run.result.label, format(run.result.deliveredRatio, 4), milliseconds(run, \.p50), milliseconds(run, \.p99),
                ratio.map { "\(format($0, 2)) (goal ≤ 1.5: \(verdict($0 <= 1.5)))" } ?? "-",
                run.daemonCPUPerThousand.map { format($0, 3) } ?? "-",
            ]
        })
    }
}

extension MarkdownReport {
    /// s.: row-level security at a cost per cohort, against the targets and Supabase's method.
    private mutating func rowSecurity() {
        let runs = results.runs("rls")
        guard !runs.isEmpty else { return }
        line("### s. Row-level security: 100 users in 10 teams, each change visible to one team, 400 changes/s")
        line()
        line("Each WebSocket client signs in with its user's token; the table's policy joins a membership table. Every client checks that it got its team's rows only (`foreign` counts rows of another team: a leak), each one, in order. Statements are the policy checks the daemon ran, per change committed. Latency is receipt minus `commit_timestamp` (milliseconds).")
        line()
        table(
            [
                "run", "delivered ratio", "foreign rows", "deliveries/s", "p50 ms", "p99 ms", "statements per change", "check time ms per change",
                "pgherald CPU s / 1000 deliveries", "+ the checks' backend",
            ],
            runs.map { run in
                let perChange = { (value: Double) in run.committed > 0 ? value / Double(run.committed) : 0 }
                return [
                    run.result.label, format(run.result.deliveredRatio, 4), run.result.foreign.map(String.init) ?? "-",
                    run.deliveriesPerSecond.map { grouped($0) } ?? "-", milliseconds(run, \.p50), milliseconds(run, \.p99),
                    run.rowSecurity.map { format(perChange(Double($0.checks)), 2) } ?? "-",
                    run.rowSecurity.map { format(perChange($0.checkSeconds * 1000), 3) } ?? "-",
                    run.daemonCPUPerThousand.map { format($0, 4) } ?? "-",
                    totalCPUPerThousand(run).map { format($0, 4) } ?? "-",
                ]
            }
        )
        let cohorts = runs.first { $0.result.label.contains("10 devices, row-level security") }
        let oneDevice = runs.first { $0.result.label.contains("1 device") }
        let unfiltered = runs.first { $0.result.label.contains("no row-level security") }
        guard let cohorts else { return }
        line()
        line("Targets:")
        line()
        let rate = cohorts.deliveriesPerSecond ?? 0
        line("- at least 40,000 deliveries/s with row-level security: \(grouped(rate)) (\(verdict(rate >= 40_000)))")
        if let p99 = cohorts.result.latencyMilliseconds?.p99 {
            line("- p99 commit to delivery at most 100 ms: \(format(p99, 1)) ms (\(verdict(p99 <= 100)))")
        }
        if let many = cohorts.rowSecurity, let one = oneDevice?.rowSecurity, let oneRun = oneDevice {
            let (perChangeMany, perChangeOne) = (Double(many.checks) / Double(max(1, cohorts.committed)), Double(one.checks) / Double(max(1, oneRun.committed)))
            line("- statements independent of devices per user: \(format(perChangeMany, 2)) per change with 10 devices, \(format(perChangeOne, 2)) with 1 (\(verdict(perChangeMany <= perChangeOne * 1.25)))")
        }
        if let own = cohorts.daemonCPUPerThousand, let plain = unfiltered?.daemonCPUPerThousand, plain > 0 {
            line("- daemon CPU per delivery at most 2 times the path without row-level security: \(format(own / plain, 2)) times (\(verdict(own / plain <= 2))); with the checks' PostgreSQL backend counted too, \(totalCPUPerThousand(cohorts).map { format($0 / plain, 2) } ?? "-") times")
        }
        if let foreign = cohorts.result.foreign {
            line("- every subscriber received exactly its rows: \(foreign) foreign, \(cohorts.result.missing) missing, \(cohorts.result.duplicatedOrReordered) repeated or reordered (\(verdict(foreign == 0 && cohorts.result.missing == 0 && cohorts.result.duplicatedOrReordered == 0 && cohorts.result.deliveredRatio >= 0.999)))")
        }
    }

    /// c.'s fan-out on the socket and over HTTPS with HTTP/2, the medians of
    /// each shape's rounds, with the ratios the target is set on.
    private mutating func network() {
        let runs = results.runs("network")
        guard !runs.isEmpty else { return }
        line("### t. Over the network: HTTPS with HTTP/2 beside the Unix socket")
        line()
        line("c.'s shapes on one daemon with `http.listen` on loopback, TLS from a test CA: each round runs them on the socket, then over HTTPS with HTTP/2, first a connection per subscriber (apps on phones), then 100 streams a connection (a browser tab's). The 100-subscriber shape also runs over plain TCP and over HTTPS with HTTP/1.1, a connection each, to say where the difference goes. Each figure is the median of the rounds; latency is commit to receipt. On loopback, the sender's write also runs the receiver's TCP processing, so TCP's share here is more than a real network would charge the daemon.")
        line()
        var rows: [[String]] = []
        var targets: [String] = []
        let transports = [
            ("Unix socket", "Unix socket"), ("plain TCP with HTTP/1.1, a connection each", "plain TCP, HTTP/1.1, a connection each"),
            ("HTTPS with HTTP/1.1, a connection each", "HTTPS, HTTP/1.1, a connection each"),
            ("HTTPS with HTTP/2, a connection each", "HTTPS, HTTP/2, a connection each"),
            ("HTTPS with HTTP/2, 100 streams a connection", "HTTPS, HTTP/2, 100 streams a connection"),
        ]
        for (subscribers, rate) in [(100, 1000), (1000, 100)] {
            func rounds(_ transport: String) -> [BenchResults.Run] {
                runs.filter { $0.result.subscribers == subscribers && $0.rate == rate && $0.result.label.hasSuffix(transport) }
            }
            func medianOf(_ runs: [BenchResults.Run], _ figure: (BenchResults.Run) -> Double?) -> Double? { median(runs.compactMap(figure)) }
            let cost = { (runs: [BenchResults.Run]) in medianOf(runs) { $0.daemonCPUPerThousand.map { $0 * 1000 } } }
            let p99 = { (runs: [BenchResults.Run]) in medianOf(runs) { $0.result.latencyMilliseconds?.p99 } }
            for (suffix, name) in transports {
                let transport = rounds(suffix)
                guard !transport.isEmpty else { continue }
                rows.append([
                    "\(subscribers) × \(rate)/s", name, "\(transport.count)", format(transport.map(\.result.deliveredRatio).min() ?? 0, 4),
                    medianOf(transport, \.deliveriesPerSecond).map { grouped($0) } ?? "-",
                    medianOf(transport) { $0.result.latencyMilliseconds?.p50 }.map { format($0, 2) } ?? "-",
                    p99(transport).map { format($0, 2) } ?? "-", cost(transport).map { format($0, 2) } ?? "-",
                ])
            }
            let socket = rounds(transports[0].0)
            guard let socketCost = cost(socket), socketCost > 0, let socketP99 = p99(socket) else { continue }
            for (suffix, name) in transports.dropFirst() where name.hasPrefix("HTTPS, HTTP/2") {
                let https = rounds(suffix)
                guard let httpsCost = cost(https), let httpsP99 = p99(https) else { continue }
                let ratio = httpsCost / socketCost
                let within = subscribers == 100 ? " (target within 2 ms: \(verdict(httpsP99 - socketP99 <= 2)))" : ""
                targets.append("- \(subscribers) × \(rate)/s, \(name): daemon CPU per delivery \(format(ratio, 2)) times the socket's (\(format(httpsCost, 2)) against \(format(socketCost, 2)) µs; target 1.5 or less: \(verdict(ratio <= 1.5))); p99 \(format(httpsP99, 2)) against \(format(socketP99, 2)) ms, \(signed(httpsP99 - socketP99)) ms\(within)")
            }
        }
        table(["shape", "transport", "rounds", "delivered ratio", "deliveries/s", "p50 ms", "p99 ms", "pgherald CPU µs / delivery"], rows)
        guard !targets.isEmpty else { return }
        line("Targets:")
        line()
        for target in targets { line(target) }
        line()
    }

    private mutating func ingestion() {
        let runs = results.runs("ingestion")
        guard !runs.isEmpty || results.walPerWrite != nil || results.journalVacuum != nil else { return }
        line("### u. The event's way in")
        line()
        if !runs.isEmpty {
            line("One subscriber. At full speed one writer commits 100-row transactions; at 2,000/s four writers commit single rows, on the same daemon after the first run filled its history, then into plpgsql triggers, whose single rows the daemon's backend puts together from their parts. CPU per event committed, the daemon's (sweeps, decoding, the broker, the stream) and its listening backend's.")
            line()
            table(["load", "events", "delivered ratio", "pgherald CPU µs / event", "its backend µs / event", "p50 ms", "p99 ms", "target"], runs.map { run in
                let events = Double(max(run.committed, 1))
                let daemon = run.daemonCPUSeconds.map { $0 * 1e6 / events }
                let backend = run.listenerBackendCPUSeconds.map { $0 * 1e6 / events }
                let target: String
                if run.rate == nil {
                    target = "3 and 2 µs: \(verdict((daemon ?? .infinity) <= 3 && (backend ?? .infinity) <= 2))"
                } else {
                    target = "10 µs: \(verdict((daemon ?? .infinity) <= 10))"
                }
                return [
                    run.result.label, grouped(Double(run.committed)), format(run.result.deliveredRatio, 4),
                    daemon.map { format($0, 2) } ?? "-", backend.map { format($0, 2) } ?? "-",
                    milliseconds(run, \.p50), milliseconds(run, \.p99), target,
                ]
            })
        }
        if let wal = results.walPerWrite, let none = wal.first(where: { $0.trigger == "none" }) {
            line("WAL per single-row durable transaction (`pg_current_wal_insert_lsn()` around 2,000 of them, one writer):")
            line()
            table(["trigger", "bytes", "beyond no trigger", "target"], wal.map { figure in
                let target = figure.trigger == "native" ? "450: \(verdict(figure.bytesPerTransaction <= 450))" : "-"
                return [figure.trigger, format(figure.bytesPerTransaction, 0), format(figure.bytesPerTransaction - none.bytesPerTransaction, 0), target]
            })
        }
        if let vacuum = results.journalVacuum {
            // Parts go whole: the journal holds one to two retentions of events, and from then on no more,
            // each in no more room than at first. A part is emptied at the first pruning run after its
            // retention, so two retentions are held for a little longer than two retentions.
            let window = vacuum.samples.filter { $0.seconds <= 2 * vacuum.retentionSeconds }
            let settled = vacuum.samples.filter { $0.seconds > 2 * vacuum.retentionSeconds }
            let peak = window.max { $0.rows < $1.rows }
            let eventsPerSecond = peak.map { Double($0.rows) / Double(max($0.seconds, 1)) } ?? 0
            let bytesPerEvent = peak.map { Double($0.bytes) / Double(max($0.rows, 1)) } ?? 0
            let mostEvents = eventsPerSecond * Double(2 * vacuum.retentionSeconds) * 1.125
            let held = !settled.isEmpty && settled.allSatisfy {
                Double($0.rows) <= mostEvents && Double($0.bytes) <= Double(max($0.rows, 1)) * bytesPerEvent * 1.125
            }
            let most = settled.max { $0.rows < $1.rows }
            line("\(vacuum.writers) writers for \(vacuum.seconds) s (\(vacuum.writerTPS.map { grouped($0) } ?? "?") commits/s), retention \(vacuum.retentionSeconds) s: the journal at its largest in the first two retentions \(format(Double(peak?.bytes ?? 0) / 1_048_576, 1)) MiB (\(grouped(Double(peak?.rows ?? 0))) events, \(format(bytesPerEvent, 0)) B each), after them between \(format(Double(settled.map(\.bytes).min() ?? 0) / 1_048_576, 1)) and \(format(Double(settled.map(\.bytes).max() ?? 0) / 1_048_576, 1)) MiB, at most \(grouped(Double(most?.rows ?? 0))) events, \(format(Double(most?.rows ?? 0) / max(eventsPerSecond, 1), 0)) s of writes; \(grouped(Double(vacuum.pruned))) events emptied with their parts; vacuums \(vacuum.autovacuums ?? 0), autoanalyzes \(vacuum.autoanalyzes ?? 0), dead rows \(vacuum.deadRows ?? 0) (target: no vacuum, and at most two retentions of events, within an eighth, in no more room each: \(verdict((vacuum.autovacuums ?? 1) == 0 && held))).")
            line()
            table(["s", "MiB", "rows", "current part"], vacuum.samples.map {
                ["\($0.seconds)", format(Double($0.bytes) / 1_048_576, 1), grouped(Double($0.rows)), "\($0.current)"]
            })
        }
    }

    /// The daemon's CPU and its checks' backend's, per 1000 deliveries.
    private func totalCPUPerThousand(_ run: BenchResults.Run) -> Double? {
        guard let daemon = run.daemonCPUSeconds, let backend = run.rowSecurityBackendCPUSeconds, run.result.received > 0 else { return nil }
        return (daemon + backend) * 1000 / Double(run.result.received)
    }
}

extension MarkdownReport {
    /// w.: bystanders on one table, with no attack and then while one realtime key runs the fair-share attacks at their limits.
    private mutating func underAttack() {
        let runs = results.runs("under-attack")
        guard !runs.isEmpty else { return }
        line("### w. Under attack: bystanders while one key runs the fair-share attacks")
        line()
        line("SSE subscribers on the socket follow `bench_event` alone (`/events?table=bench_event`) while one writer commits 100 rows/s there; first with no attack, then while one realtime key holds its connections and channels up to `realtime.max_connections_per_key` and `max_channels_per_key` (each channel a `like` filter of `%`, 280 `_` and a letter on `bench_attack`), `/events?where=` streams of 25 such patterns read `bench_attack`, a writer puts 2,000-character rows into it, and a member of a topic that never reads receives broadcasts near `realtime.broadcast.max_bytes` and large presence metas. Latency is commit to receipt; the daemon's CPU covers the attack's work too.")
        line()
        let quiet = runs.first { $0.attack == nil }
        table(["run", "delivered ratio", "p50 ms", "p99 ms", "max ms", "p99 ÷ no attack's", "pgherald CPU s"], runs.map { run in
            let ratio = quiet.flatMap { quiet in
                run.result.latencyMilliseconds.flatMap { own in quiet.result.latencyMilliseconds.map { own.p99 / max($0.p99, 0.001) } }
            }
            return [
                run.result.label, format(run.result.deliveredRatio, 4), milliseconds(run, \.p50), milliseconds(run, \.p99), milliseconds(run, \.max),
                ratio.map { format($0, 2) } ?? "-", run.daemonCPUSeconds.map { format($0, 2) } ?? "-",
            ]
        })
        // The machine's share: the same attack at a second daemon. What the attacked run waits past it is this daemon's.
        if let attacked = runs.first(where: { $0.attack != nil && !$0.result.label.contains("machine") })?.result.latencyMilliseconds,
           let machine = runs.first(where: { $0.result.label.contains("machine") })?.result.latencyMilliseconds {
            line("The attack at a second daemon put the bystanders' p99 at \(format(machine.p99, 1)) ms: that much of the wait is the machine's, shared by the attack's client, its writer, PostgreSQL and the other daemon. Attacked itself, the daemon gave them p99 \(format(attacked.p99, 1)) ms, \(format(attacked.p99 / max(machine.p99, 0.001), 2)) times the machine's share.")
            line()
        }
        for run in runs {
            guard let attack = run.attack else { continue }
            // The daemon's own count (/stats) of what the key held; the client's view of its joins is a guess by the replies it read.
            let held = attack.heldByKey.map { "the daemon counted \($0.connections) connections and \($0.channels) channels for the key" }
                ?? "\(attack.connections) connections and \(attack.channels) channels held, as the client saw it"
            line("The attack over \(format(attack.seconds, 0)) s: \(attack.connections + attack.connectionsRefused) connections tried with one key (\(attack.connectionsRefused) refused with 429) and \(attack.channels + attack.channelsRefused) channel joins, all but the topic's 3 a like filter: \(held); \(attack.likeStreams) like streams that read \(grouped(Double(attack.likeStreamLines))) lines, \(grouped(Double(attack.broadcasts))) broadcasts of \(format(Double(attack.broadcastBytes) / Double(max(attack.broadcasts, 1)) / 1024, 1)) KiB to a member that never reads (\(attack.broadcastsRefused) refused, \(attack.broadcastsHeldBack.map { grouped(Double($0)) } ?? "?") held back while the daemon had not taken the last MiB sent), \(attack.presenceTracks) presence tracks, \(attack.rowsWritten.map { grouped(Double($0)) } ?? "?") rows of 2,000 characters written to `bench_attack`; its sockets read \(format(Double(attack.bytesRead) / 1_048_576, 1)) MiB, and the daemon closed \(attack.closedByDaemon.map(String.init) ?? "?") of them.")
            line()
        }
    }
}

extension MarkdownReport {
    /// x.: pgherald and nginx + nchan at c.'s two shapes, in alternating rounds; means per side and shape.
    private mutating func sideBySide() {
        let runs = results.runs("side-by-side")
        guard !runs.isEmpty else { return }
        line("### x. Side by side: nginx + nchan")
        line()
        line("The same load client reads Server-Sent Events on a Unix socket from pgherald and from one nginx worker with nchan (in-memory storage); nchan's events are POSTed in pgherald's event shape and size. pgherald's latency starts at the trigger, so its commit and read are in it; nchan's starts at the POST. CPU is pgherald's process and nginx's worker, per delivery; figures are means over the rounds. The last column is what pgherald's writer waited for its own commits (fsync on), which is in pgherald's latency and in nothing of nchan's.")
        line()
        // "SIDE, SHAPE": the shapes in the order first run.
        func split(_ label: String) -> (side: String, shape: String) {
            let comma = label.firstIndex(of: ",") ?? label.endIndex
            return (String(label[..<comma]), label[comma...].drop { $0 == "," || $0 == " " }.description)
        }
        var shapes: [String] = []
        for run in runs where !shapes.contains(split(run.result.label).shape) { shapes.append(split(run.result.label).shape) }
        func mean(_ side: String, _ shape: String, _ figure: (BenchResults.Run) -> Double?) -> Double? {
            let values = runs.filter { split($0.result.label) == (side, shape) }.compactMap(figure)
            return values.isEmpty ? nil : values.reduce(0, +) / Double(values.count)
        }
        let perDelivery: (BenchResults.Run) -> Double? = { $0.daemonCPUPerThousand.map { $0 * 1000 } }
        let p50: (BenchResults.Run) -> Double? = { $0.result.latencyMilliseconds?.p50 }
        let p99: (BenchResults.Run) -> Double? = { $0.result.latencyMilliseconds?.p99 }
        let rss: (BenchResults.Run) -> Double? = { $0.daemonPeakRSSKiB.map { Double($0) / 1024 } }
        let delivered: (BenchResults.Run) -> Double? = { $0.result.deliveredRatio }
        var rows: [[String]] = []
        for shape in shapes {
            for side in ["pgherald", "nchan"] {
                rows.append([
                    shape, side, mean(side, shape, delivered).map { format($0, 4) } ?? "-",
                    mean(side, shape, perDelivery).map { format($0, 2) } ?? "-",
                    mean(side, shape, p50).map { format($0, 2) } ?? "-", mean(side, shape, p99).map { format($0, 2) } ?? "-",
                    mean(side, shape, rss).map { format($0, 0) } ?? "-",
                    mean(side, shape) { $0.commitLatencyMilliseconds?.p99 }.map { format($0, 2) } ?? "-",
                ])
            }
            func ratio(_ figure: (BenchResults.Run) -> Double?) -> String {
                guard let ours = mean("pgherald", shape, figure), let theirs = mean("nchan", shape, figure), theirs > 0 else { return "-" }
                return format(ours / theirs, 2) + "×"
            }
            rows.append([shape, "pgherald ÷ nchan", "", ratio(perDelivery), ratio(p50), ratio(p99), ratio(rss), ""])
        }
        table(["shape", "side", "delivered ratio", "CPU µs a delivery", "p50 ms", "p99 ms", "peak RSS MB", "writer's commit p99 ms"], rows)
        line("Target (issue \"Speed round 4\"): pgherald's CPU a delivery at or below nchan's at both shapes.")
        line()
    }
}

extension MarkdownReport {
    /// y.: streams that all resume at once when the daemon starts again under them.
    private mutating func restartHerd() {
        let runs = results.runs("herd")
        guard !runs.isEmpty else { return }
        line("### y. The restart herd")
        line()
        line("Every stream follows `bench_event` on the Unix socket and has its first rows; the daemon stops, rows are written while it is down, and it starts again under the streams, which reconnect with `Last-Event-ID` at once, retrying every 100–200 ms while it is down. The time runs from the daemon's start to the last stream's last row; CPU is the new daemon's from its start.")
        line()
        let rows = runs.map { run -> [String] in
            let result = run.result
            let last: Double? = if let end = result.lastReceiptMicroseconds, let start = run.commitEndMicroseconds { Double(end - start) / 1e6 } else { nil }
            return [
                result.label, format(result.deliveredRatio, 4), String(result.missing), String(result.duplicatedOrReordered),
                String(result.failedStreams), last.map { format($0, 2) } ?? "-", run.daemonCPUSeconds.map { format($0, 2) } ?? "-",
                run.replays.map { "\($0.resumes) resumes, \($0.lookups) lookups, \($0.pagesRead) pages read, \($0.pagesShared) shared" } ?? "from memory",
            ]
        }
        table(["run", "delivered ratio", "missing", "repeats", "failed streams", "start to last stream complete, s", "daemon CPU s", "journal"], rows)
        line("Target (issue \"Speed round 4\"): 10,000 clients resume with exactly what they missed, no reset, the last within 5 s.")
        line()
    }
}

extension MarkdownReport {
    /// z.: fifteen thousand streams on one daemon.
    private mutating func manyStreams() {
        let runs = results.runs("many")
        guard !runs.isEmpty else { return }
        line("### z. Fifteen thousand streams")
        line()
        line("Open to every stream open, from the load client's start; close, from its exit until `/stats` counted none. A stream's memory is the daemon's resident growth with every stream open and none written to, divided by the streams. Threads: each daemon thread's CPU over the run (the loops are `NIO-ELT-…`).")
        line()
        let rows = runs.map { run -> [String] in
            let result = run.result
            let perStream: String = if let open = run.daemonRSSKiB, let before = run.idleRSSBeforeKiB, result.subscribers > 0 {
                format(Double(open - before) / Double(result.subscribers), 1)
            } else { "-" }
            let threads = run.threadCPUSeconds?.prefix(4).map { "\($0.thread) \(format($0.cpuSeconds, 1))" }.joined(separator: ", ") ?? "-"
            return [
                result.label, format(result.deliveredRatio, 4),
                run.deliveriesPerSecond.map { grouped($0) } ?? "-",
                result.latencyMilliseconds.map { format($0.p50, 1) } ?? "-", result.latencyMilliseconds.map { format($0.p99, 1) } ?? "-",
                run.daemonCPUPerThousand.map { format($0 * 1000, 2) } ?? "-",
                run.openSeconds.map { format($0, 2) } ?? "-", run.closeSeconds.map { format($0, 2) } ?? "-", perStream, threads,
            ]
        }
        table(["run", "delivered ratio", "deliveries/s", "p50 ms", "p99 ms", "CPU µs a delivery", "open s", "close s", "KiB a stream", "threads' CPU s"], rows)
        line("Targets (issue \"Speed round 4\"): 15,000 streams; at 100,000 deliveries/s every event, p99 ≤ 100 ms, both cores; an idle stream ≤ 4 KiB; open and close in a few seconds.")
        line()
    }
}
