import ArgumentParser
import Foundation
import NIOPosix

/// SUBSCRIBERS SSE streams on the daemon's socket, every event checked.
struct Subscribe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Open SSE streams on pgherald's socket and measure what arrives.")

    @Option(help: "The daemon's socket.")
    var socket: String

    @Option(help: "Concurrent streams.")
    var subscribers: Int = 1

    @Option(help: "Event-loop threads the streams are spread over.")
    var threads: Int = 1

    @OptionGroup var run: RunOptions

    func run() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let fleet = try await Fleet.connect(socketPath: socket, path: "/events", subscribers: subscribers, group: group)
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
        try await group.shutdownGracefully()
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
