import ArgumentParser
import Foundation

/// The load client and report writer behind `scripts/bench`.
///
/// Each measuring command connects, prints `ready`, reads from standard input
/// how many events the writer committed, waits until every subscriber has
/// them (or the wait runs out), and prints one JSON line: a ``LoadResult``.
@main
struct HeraldBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pgherald-bench",
        abstract: "Load client and report for scripts/bench.",
        subcommands: [Subscribe.self, LiveQueryLoad.self, Listen.self, Receive.self, Publish.self, Report.self]
    )
}

/// Options shared by the measuring commands.
struct RunOptions: ParsableArguments {
    @Option(help: "Scenario name recorded in the result.")
    var scenario: String = "adhoc"

    @Option(help: "Label recorded in the result.")
    var label: String = ""

    @Option(help: "Seconds to wait for the events once the committed count has arrived.")
    var wait: Double = 60

    /// Prints `ready`, then reads the committed count from standard input.
    /// - Returns: the count, and this process's CPU seconds and the wall
    ///   clock when it became ready, so that its CPU use covers the writes.
    func awaitCommittedCount() throws -> (expected: Int, readyCPU: Double, readyWall: Int64) {
        let ready = (cpu: processCPUSeconds(), wall: nowMicroseconds())
        print("ready")
        fflush(nil)
        guard let line = readLine(), let expected = Int(line.trimmingCharacters(in: .whitespaces)) else {
            throw ValidationError("expected the number of committed events on standard input")
        }
        return (expected, ready.cpu, ready.wall)
    }
}
