import ArgumentParser
import Foundation
import HeraldPostgres
import Synchronization

/// One bare libpq LISTEN client: the floor that commit and NOTIFY set.
struct Listen: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "LISTEN with bare libpq and measure what arrives, as the physical limit.")

    @Option(help: "libpq connection string.")
    var db: String

    @Option(help: "Channel to LISTEN on. Default: the one pgherald's install chose (read from pgherald.setting).")
    var channel: String?

    @OptionGroup var run: RunOptions

    func run() async throws {
        let listener = try BareListener(connInfo: db, channel: channel)
        let (expected, readyCPU, readyWall) = try run.awaitCommittedCount()
        let deadline = nowMicroseconds() + Int64(run.wait * 1e6)
        while listener.record.withLock({ $0.received }) < expected, nowMicroseconds() < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        listener.stop()
        let record = listener.record.withLock { $0 }
        let sorted = record.latencies.sorted()
        try LoadResult(
            scenario: run.scenario,
            label: run.label,
            subscribers: 1,
            expectedPerSubscriber: expected,
            received: record.received,
            deliveredRatio: expected == 0 ? 1 : Double(record.received) / Double(expected),
            missing: max(0, expected - record.received),
            duplicatedOrReordered: 0,
            overflows: 0,
            resumes: 0,
            failedStreams: listener.failure.withLock { $0 } == nil ? 0 : 1,
            firstFailure: listener.failure.withLock { $0 },
            latencyMilliseconds: LoadResult.Latency(sorted: sorted),
            latencyCDF: LoadResult.cdf(sorted: sorted),
            firstReceiptMicroseconds: record.received > 0 ? record.firstReceiptMicroseconds : nil,
            lastReceiptMicroseconds: record.received > 0 ? record.lastReceiptMicroseconds : nil,
            clientCPUSeconds: processCPUSeconds() - readyCPU,
            clientWallSeconds: Double(nowMicroseconds() - readyWall) / 1e6,
            clientThreads: 1
        ).print()
    }
}

/// A libpq connection on its own thread that records each notification's
/// latency from the `at` in the trigger's payload.
final class BareListener: Sendable {
    let record = Mutex(StreamRecord())
    let failure = Mutex<String?>(nil)
    private let stopped = Mutex(false)

    /// Returns once the connection is LISTENing.
    /// - Parameter channel: `nil` for the one pgherald's install chose.
    init(connInfo: String, channel: String?) throws {
        let connectionString = try ConnectionString(connInfo)
        let listening = DispatchSemaphore(value: 0)
        // libpq blocks, so the connection lives on a thread of its own.
        let thread = Thread { [self] in
            let connection: LibpqConnection
            do {
                connection = try LibpqConnection.connect(connectionString, applicationName: "pgherald-bench")
                let name = try channel ?? Journal.notificationChannel(on: connection) ?? "pgherald"
                try connection.execute("LISTEN \(try connection.escapeIdentifier(name))")
            } catch {
                failure.withLock { $0 = "\(error)" }
                listening.signal()
                return
            }
            listening.signal()
            var count: UInt64 = 0
            while !stopped.withLock({ $0 }) {
                do {
                    try connection.receiveNotifications(until: .now + .milliseconds(100)) { _, payload, _ in
                        let now = nowMicroseconds()
                        count += 1
                        guard let at = EventFields.timestamp(in: UnsafeRawBufferPointer(payload)) else { return }
                        record.withLock { $0.record(count: count, at: at, now: now) }
                    }
                } catch let error as LibpqError where error.code == .timedOut {
                } catch {
                    failure.withLock { $0 = "\(error)" }
                    return
                }
            }
        }
        thread.start()
        listening.wait()
        if let failure = failure.withLock({ $0 }) { throw ValidationError("cannot LISTEN: \(failure)") }
    }

    func stop() {
        stopped.withLock { $0 = true }
    }
}
