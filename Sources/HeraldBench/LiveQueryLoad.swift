import ArgumentParser
import Foundation
import Herald
import HeraldPostgres
import NIOPosix
import Synchronization

/// Scenario o.: SUBSCRIBERS apps that show one query's result, kept current
/// one of two ways while writers change the query's table.
///
/// - `shared`: each follows `GET /queries/NAME`; the daemon runs the query once per burst for all.
/// - `seed`: the seed apps' pattern. Each follows `/events` on the table and,
///   on every change notice, runs the query itself on its own connection
///   (while one runs, notices only make it run once more after).
///
/// Latency is receipt of a result minus `written_us`, which the writer sets
/// with `clock_timestamp()` just before commit, for every row whose
/// `written_us` the result changed.
struct LiveQueryLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "livequery", abstract: "Follow one live query from many apps, as a live query or as the seed apps do, and measure commit to result."
    )

    enum Mode: String, ExpressibleByArgument { case shared, seed }

    @Option(help: "The daemon's socket.")
    var socket: String

    @Option(help: "Apps showing the query.")
    var subscribers: Int = 1

    @Option(help: "shared (GET /queries/NAME) or seed (/events, then the query on the app's own connection).")
    var mode: Mode = .shared

    @Option(help: "The live query, configured as queries.NAME; its rows have id and written_us.")
    var query = "bench_live"

    @Option(help: "The table it reads (seed mode's /events filter).")
    var table = "bench_live"

    @Option(help: "The query's SQL, for seed mode.")
    var sql = "select id, n, written_us from bench_live"

    @Option(help: "libpq conninfo, for seed mode.")
    var db = ""

    @OptionGroup var run: RunOptions

    func run() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let apps: [SeedApp]
        let fleet: Fleet<SSEStream>
        switch mode {
        case .shared:
            apps = []
            fleet = try await Fleet.connect(subscribers: subscribers, group: group) { [socket, query] loop in
                let stream = SSEStream(socketPath: socket, path: "/queries/\(query)", eventLoop: loop)
                var written: [JSONValue: Int64] = [:]
                stream.onData = { line, now, record in
                    Self.recordResult(Self.rows(inFrame: line), now: now, written: &written, into: &record)
                }
                return stream
            }
        case .seed:
            let connection = try ConnectionString(db)
            let made = try (0..<subscribers).map { _ in try SeedApp(connection: connection, sql: sql) }
            apps = made
            let next = Atomic<Int>(0)
            fleet = try await Fleet.connect(subscribers: subscribers, group: group) { [socket, table] loop in
                let stream = SSEStream(socketPath: socket, path: "/events?table=\(table)", eventLoop: loop)
                let app = made[next.add(1, ordering: .relaxed).oldValue]
                stream.onData = { _, _, _ in app.changeNoticed() }
                return stream
            }
            for app in apps { app.changeNoticed() }
        }
        let (expected, readyCPU, readyWall) = try run.awaitCommittedCount()
        // The last burst: a coalescing window, then the query itself.
        try await Task.sleep(for: .seconds(2))
        for app in apps { await app.idle() }
        let cpu = processCPUSeconds() - readyCPU
        let wall = Double(nowMicroseconds() - readyWall) / 1e6
        var tally = try await fleet.tally(expected: expected, latencies: true)
        try await fleet.stop()
        var queriesRun: Int?
        if mode == .seed {
            var record = StreamRecord()
            for app in apps { app.take(into: &record) }
            tally.record.received = record.received
            tally.record.latencies = record.latencies
            tally.record.lastReceiptMicroseconds = record.lastReceiptMicroseconds
            tally.firstReceipt = record.firstReceiptMicroseconds
            queriesRun = apps.reduce(0) { $0 + $1.queries }
        }
        let sorted = tally.record.latencies.sorted()
        var result = LoadResult(
            scenario: run.scenario, label: run.label, subscribers: subscribers, expectedPerSubscriber: expected,
            received: tally.record.received, deliveredRatio: 1, missing: 0, duplicatedOrReordered: 0,
            overflows: tally.record.overflows, resumes: tally.record.resumes, failedStreams: tally.failedStreams,
            firstFailure: tally.firstFailure, latencyMilliseconds: LoadResult.Latency(sorted: sorted),
            latencyCDF: LoadResult.cdf(sorted: sorted), firstReceiptMicroseconds: tally.firstReceipt,
            lastReceiptMicroseconds: tally.record.received > 0 ? tally.record.lastReceiptMicroseconds : nil,
            clientCPUSeconds: cpu, clientWallSeconds: wall, clientThreads: 1
        )
        result.queriesRun = queriesRun
        try result.print()
        try await group.shutdownGracefully()
    }

    /// The rows of a `result` frame, or the added and changed rows of a `diff`.
    static func rows(inFrame line: UnsafeRawBufferPointer) -> [JSONValue] {
        guard let object = try? JSONParser.parse(Array(line.dropFirst(6))).objectValue else { return [] }
        var rows: [JSONValue] = []
        for name in ["rows", "added", "changed"] {
            if case .array(let some)? = object[name] { rows += some }
        }
        return rows
    }

    /// One result received: a latency for every row whose `written_us` moved since this app's last result.
    static func recordResult(_ rows: [JSONValue], now: Int64, written: inout [JSONValue: Int64], into record: inout StreamRecord) {
        let first = written.isEmpty
        record.received += 1
        if record.received == 1 { record.firstReceiptMicroseconds = now }
        record.lastReceiptMicroseconds = now
        for row in rows {
            guard let object = row.objectValue, let id = object["id"], case .number(let number)? = object["written_us"],
                  let at = number.int64Value else { continue }
            if written[id] != at {
                if !first { record.latencies.append(Int32(clamping: now - at)) }
                written[id] = at
            }
        }
    }
}
