import ArgumentParser
import Foundation
import Herald
import HeraldClient

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show a running daemon's counters, subscribers and listener state.")

    @OptionGroup var socket: SocketPathOption

    @Flag(help: "Print the raw JSON of GET /stats.")
    var json = false

    func run() async throws {
        let statistics = try await HeraldClient(socketPath: socket.path).statistics()
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
            print(String(decoding: try encoder.encode(statistics), as: UTF8.self))
            return
        }
        print(Self.render(statistics))
    }

    static func render(_ statistics: DaemonStatistics) -> String {
        var lines = ["pgherald \(statistics.version), up \(duration(statistics.uptimeSeconds))"]
        let listener = statistics.listener
        lines.append("listener:    \(listener.state)\(listener.reason.map { " (\($0))" } ?? "")")
        lines.append("changes:     \(statistics.changeCount)")
        let width = statistics.tables.keys.map(\.count).max() ?? 0
        for (table, count) in statistics.tables.sorted(by: { $0.key < $1.key }) {
            lines.append("  \(table.padding(toLength: width, withPad: " ", startingAt: 0))  \(count)")
        }
        let subscribers = statistics.subscribers.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
        lines.append("subscribers: \(subscribers.isEmpty ? "none" : subscribers.joined(separator: ", "))")
        lines.append("overflows:   \(statistics.overflows)")
        if let durability = statistics.durability { lines.append("durability:  \(durability)") }
        if let journal = statistics.journal {
            let oldest = journal.oldestAt.map { "oldest \($0) (event \(journal.oldestEventID ?? "?"))" } ?? "empty"
            lines.append("journal:     about \(journal.rows) events, \(journal.bytes / 1024) KiB, \(oldest); "
                + "keeps \(duration(journal.retentionSeconds)), pruned \(journal.pruned)")
        }
        return lines.joined(separator: "\n")
    }

    private static func duration(_ seconds: Double) -> String {
        let total = Int(seconds)
        if total < 60 { return "\(total)s" }
        if total < 3600 { return "\(total / 60)m\(total % 60)s" }
        return "\(total / 3600)h\(total % 3600 / 60)m"
    }
}
