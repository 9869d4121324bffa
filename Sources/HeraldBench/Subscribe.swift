import ArgumentParser
import Foundation
import NIOPosix

/// SUBSCRIBERS streams on the daemon's socket, every event checked.
struct Subscribe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Open SSE or Supabase Realtime streams on pgherald's socket and measure what arrives.")

    enum StreamProtocol: String, ExpressibleByArgument {
        case sse, realtime
    }

    @Option(help: "The daemon's socket.")
    var socket: String

    @Option(help: "Concurrent streams.")
    var subscribers: Int = 1

    @Option(help: "Event-loop threads the streams are spread over.")
    var threads: Int = 1

    @Option(help: "sse (GET /events) or realtime (WebSocket, Supabase Realtime postgres_changes on bench_event).")
    var `protocol`: StreamProtocol = .sse

    @Option(help: "With a number N: GET /events?group=transaction, every message checked to hold N events (the writers' rows per transaction).")
    var transactionSize: Int?

    @OptionGroup var run: RunOptions

    func run() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        switch self.protocol {
        case .sse:
            try await measure(try await Fleet.connect(subscribers: subscribers, group: group) { [socket, transactionSize] loop in
                let stream = SSEStream(socketPath: socket, path: transactionSize == nil ? "/events" : "/events?group=transaction", eventLoop: loop)
                stream.transactionSize = transactionSize
                return stream
            })
        case .realtime:
            try await measure(try await Fleet.connect(subscribers: subscribers, group: group) { [socket] loop in
                RealtimeStream(socketPath: socket, eventLoop: loop)
            })
        }
        try await group.shutdownGracefully()
    }

    private func measure<Stream>(_ fleet: Fleet<Stream>) async throws {
        let (expected, readyCPU, readyWall) = try run.awaitCommittedCount()
        let deadline = nowMicroseconds() + Int64(run.wait * 1e6)
        var tally = try await fleet.tally(expected: expected, latencies: false)
        while tally.complete + tally.failedStreams < subscribers, nowMicroseconds() < deadline {
            try await Task.sleep(for: .milliseconds(100))
            tally = try await fleet.tally(expected: expected, latencies: false)
        }
        let cpu = processCPUSeconds() - readyCPU
        let wall = Double(nowMicroseconds() - readyWall) / 1e6
        tally = try await fleet.tally(expected: expected, latencies: true)
        try await fleet.stop()
        let sorted = tally.record.latencies.sorted()
        let result = LoadResult(
            scenario: run.scenario,
            label: run.label,
            subscribers: subscribers,
            expectedPerSubscriber: expected,
            received: tally.record.received,
            deliveredRatio: expected * subscribers == 0 ? 1 : Double(tally.record.received) / Double(expected * subscribers),
            missing: tally.record.missing,
            duplicatedOrReordered: tally.record.duplicatedOrReordered,
            overflows: tally.record.overflows,
            resumes: tally.record.resumes,
            failedStreams: tally.failedStreams,
            firstFailure: tally.firstFailure,
            latencyMilliseconds: LoadResult.Latency(sorted: sorted),
            latencyCDF: LoadResult.cdf(sorted: sorted),
            firstReceiptMicroseconds: tally.firstReceipt,
            lastReceiptMicroseconds: tally.record.received > 0 ? tally.record.lastReceiptMicroseconds : nil,
            clientCPUSeconds: cpu,
            clientWallSeconds: wall,
            clientThreads: threads
        )
        try result.print()
    }
}

extension LoadResult {
    /// One JSON line on standard output.
    func print() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        FileHandle.standardOutput.write(try encoder.encode(self) + Data("\n".utf8))
    }
}
