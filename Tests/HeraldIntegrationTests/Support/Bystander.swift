import AsyncHTTPClient
import Foundation
import Herald
import HeraldPostgres
import Synchronization
import Testing

/// A client that follows `course`, a table no attack touches, and times its
/// events: it writes rows one at a time, spaced out, and measures each from
/// its INSERT to its event's arrival. A phase measured alone gives its idle
/// figures; a phase measured during an attack gives the figures to compare.
///
/// Not Sendable: it keeps one database connection for its writes, so that
/// opening a connection is not counted in a latency.
final class Bystander {
    /// The latencies of one phase, from each row's INSERT to its event.
    struct Phase: CustomStringConvertible {
        let name: String
        let latencies: [Duration]

        var p50: Duration { percentile(0.50) }
        var p99: Duration { percentile(0.99) }

        /// The nearest-rank percentile: with fewer than 100 rows, p99 is the slowest.
        func percentile(_ fraction: Double) -> Duration {
            let sorted = latencies.sorted()
            guard !sorted.isEmpty else { return .zero }
            return sorted[max(0, Int((fraction * Double(sorted.count)).rounded(.up)) - 1)]
        }

        var description: String {
            "\(name): \(latencies.count) events, p50 \(Self.milliseconds(p50)) ms, p99 \(Self.milliseconds(p99)) ms"
        }

        static func milliseconds(_ duration: Duration) -> String {
            String(format: "%.1f", Double(duration.components.seconds) * 1e3 + Double(duration.components.attoseconds) / 1e15)
        }
    }

    /// Where the events come from.
    private enum Feed {
        /// An ndjson stream of `/events?table=course`, on the socket or the network listener.
        case stream(RawStream)
        /// A realtime channel with one binding on `course`.
        case realtime(RealtimeTestClient, topic: String)
    }

    /// Slack on top of twice the idle p99. The tests run a debug build on a
    /// 2-core machine that other jobs share: a bystander that keeps its share
    /// still loses a scheduler slice or two to the attacking clients, which
    /// run in the same test process, and an idle p99 of 10 ms doubled would
    /// call that a stall. A starved bystander waits seconds (issue 68's like
    /// patterns: 3.9 to 7.0 s), far past this.
    static let floor = Duration.milliseconds(250)

    private let feed: Feed
    private let writer: LibpqConnection
    /// The short codes written so far, in order: `BY0`, `BY1`, …
    private var written: [String] = []

    private init(feed: Feed, database: TestDatabase) throws {
        self.feed = feed
        writer = try database.connect()
    }

    /// Follows `course` on the daemon's socket.
    convenience init(socket daemon: SocketDaemon) async throws {
        let stream = try await RawStream(socketPath: daemon.socketPath, path: "/events?table=course&format=ndjson")
        try self.init(feed: .stream(stream), database: daemon.database)
    }

    /// Follows `course` through a listener's `/events` at `base`, such as the network listener over HTTPS.
    convenience init(base: String, headers: [(String, String)], client: HTTPClient, database: TestDatabase) async throws {
        let stream = try await RawStream(url: base + "/events?table=course&format=ndjson", headers: headers, client: client)
        try self.init(feed: .stream(stream), database: database)
    }

    /// Follows `course` on a realtime channel of its own, joined with `apikey`.
    convenience init(realtimePort port: Int, apikey: String, database: TestDatabase) async throws {
        let client = try await RealtimeTestClient(port: port, apikey: apikey)
        let topic = "realtime:bystander"
        try await IntegrationTests.RealtimeTests.join(client, topic: topic, bindings: #"{"event":"INSERT","schema":"public","table":"course"}"#)
        try self.init(feed: .realtime(client, topic: topic), database: database)
    }

    /// Writes `rows` rows `spacing` apart, each once the last one's event came, and times them.
    func measure(_ name: String, rows: Int = 20, spacing: Duration = .milliseconds(100)) async throws -> Phase {
        var latencies: [Duration] = []
        for _ in 0..<rows {
            latencies.append(try await writeAndWait())
            try await Task.sleep(for: spacing)
        }
        return Phase(name: name, latencies: latencies)
    }

    /// Runs `attack` and measures while it runs: a row every `spacing`, at most
    /// `rows` of them, until the attack ends. Returns the attack's result and
    /// the phase; the attack must last long enough for 5 rows.
    func measure<T: Sendable>(
        _ name: String, rows: Int = 200, spacing: Duration = .milliseconds(100),
        during attack: @escaping @Sendable () async throws -> T
    ) async throws -> (T, Phase) {
        let finished = Finished()
        let running = Task {
            defer { finished.flag.store(true, ordering: .releasing) }
            return try await attack()
        }
        var latencies: [Duration] = []
        while latencies.count < rows, !finished.flag.load(ordering: .acquiring) {
            latencies.append(try await writeAndWait())
            try await Task.sleep(for: spacing)
        }
        let result = try await running.value
        let phase = Phase(name: name, latencies: latencies)
        #expect(latencies.count >= 5, "the attack ended before the bystander could measure it: \(phase)")
        return (result, phase)
    }

    /// p99 under attack within twice the idle p99, or the idle p99 and `floor`;
    /// and every row the bystander wrote reached it exactly once. A test passes
    /// a floor other than ``floor`` only for an attack known to miss it, and says so.
    func expectFairShare(
        idle: Phase, underAttack: Phase, floor: Duration = Bystander.floor, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        print("bystander: \(idle); \(underAttack)")
        let bound = max(idle.p99 * 2, idle.p99 + floor)
        #expect(underAttack.p99 <= bound, "the bystander's p99 rose from \(idle.p99) to \(underAttack.p99), past \(bound): \(underAttack.latencies)",
                sourceLocation: sourceLocation)
        // A duplicate would come after its row's first copy: give it time to.
        try await Task.sleep(for: .milliseconds(300))
        let counts = try await deliveredCounts()
        let wrong = written.filter { counts[$0] != 1 }
        #expect(wrong.isEmpty, "rows not delivered exactly once: \(wrong.map { "\($0) ×\(counts[$0] ?? 0)" })", sourceLocation: sourceLocation)
        #expect(Set(counts.keys).isSubset(of: written), "events of rows never written: \(Set(counts.keys).subtracting(written))", sourceLocation: sourceLocation)
    }

    func close() async {
        if case .realtime(let client, _) = feed { await client.close() }
    }

    /// Inserts the next row and waits for its event; returns the time between.
    private func writeAndWait(within seconds: Double = 30) async throws -> Duration {
        let code = "BY\(written.count)"
        written.append(code)
        let sent = ContinuousClock.now
        try writer.execute("INSERT INTO course (short_code, name) VALUES ($1, 'bystander')", parameters: [code])
        let deadline = sent + .seconds(seconds)
        // Polled every 2 ms: the wait is what is measured, and a poll costs a lock and a scan.
        while try await !arrived(code) {
            guard ContinuousClock.now < deadline else { throw ProcessTimeout(description: "the bystander's row \(code) did not arrive within \(seconds) s") }
            try await Task.sleep(for: .milliseconds(2))
        }
        return ContinuousClock.now - sent
    }

    private func arrived(_ code: String) async throws -> Bool {
        switch feed {
        case .stream(let stream):
            return stream.received.contains(Self.marker(code))
        case .realtime(let client, let topic):
            return client.unreadMessages.contains { $0.topic == topic && Self.code(of: $0) == code }
        }
    }

    /// How many events of each short code came.
    private func deliveredCounts() async throws -> [String: Int] {
        switch feed {
        case .stream(let stream):
            let codes = stream.lines.compactMap { line -> String? in
                guard let value = try? JSONParser.parse(String(line)) else { return nil }
                return value["new"]?["short_code"]?.stringValue
            }
            return Dictionary(codes.map { ($0, 1) }, uniquingKeysWith: +)
        case .realtime(let client, let topic):
            let codes = client.unreadMessages.filter { $0.topic == topic && $0.event == "postgres_changes" }.compactMap(Self.code)
            return Dictionary(codes.map { ($0, 1) }, uniquingKeysWith: +)
        }
    }

    private static func marker(_ code: String) -> String { #""short_code":"\#(code)""# }

    private static func code(of message: RealtimeTestClient.Message) -> String? {
        message.payload["data"]?["record"]?["short_code"]?.stringValue
    }

    /// Set when the attack's task ends, however it ends.
    private final class Finished: Sendable {
        let flag = Atomic<Bool>(false)
    }
}
