import ArgumentParser
import Foundation
import Herald
import HeraldClient

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show a running daemon's counters, subscribers and listener state.")

    @OptionGroup var socket: DaemonSocketOptions

    @Flag(help: "Print the raw JSON of GET /stats.")
    var json = false

    func run() async throws {
        let statistics: DaemonStatistics
        do {
            statistics = try await HeraldClient(socketPath: try await socket.path()).statistics()
        } catch let error as HeraldClientError where error.code == .unavailable {
            FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
            throw ExitCode(Tail.unavailableExitCode)
        }
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
        if let source = listener.source {
            lines.append("source:      \(source), at sequence \(listener.streamSequence.map(String.init) ?? "none"), lag \(listener.streamLag.map(String.init) ?? "unknown")")
        }
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
        if let rowSecurity = statistics.rowSecurity {
            let time = String(format: "%.3f", rowSecurity.checkSeconds)
            lines.append("row security: \(rowSecurity.cohorts) cohorts, \(rowSecurity.batches) batches, \(rowSecurity.checks) checks in \(time) s, "
                + "\(rowSecurity.failures) failed, \(rowSecurity.aloneBatches) judged alone")
        }
        if let cluster = statistics.cluster { lines += clusterLines(cluster) }
        lines += outputLines(statistics)
        return lines.joined(separator: "\n")
    }

    /// The cluster's members as this daemon hears them, each with its role and lag, and the traffic between them.
    static func clusterLines(_ cluster: ClusterStatistics) -> [String] {
        var lines = ["cluster:     \(cluster.name) via \(cluster.server ?? "no NATS server (reconnecting)"), \(cluster.members.count) members; "
            + "broadcasts \(cluster.broadcastsSent) sent, \(cluster.broadcastsReceived) received; "
            + "presence \(cluster.presenceSent) sent, \(cluster.presenceReceived) received"]
        let width = cluster.members.map(\.name.count).max() ?? 0
        for member in cluster.members {
            var parts = [member.isSelf ? "this daemon" : "heard \(String(format: "%.1f", member.heardSecondsAgo))s ago"]
            if let last = member.lastEventID { parts.append("at event \(last)" + (member.lag.map { " (lag \($0))" } ?? "")) }
            if let sequence = member.streamSequence { parts.append("stream \(sequence), lag \(member.streamLag ?? 0)") }
            parts.append("\(member.channels) channels, \(member.presences) present")
            lines.append("  \(member.name.padding(toLength: width, withPad: " ", startingAt: 0))  \(member.role)  \(parts.joined(separator: ", "))")
        }
        return lines
    }

    /// Every output that is on, with its health and, for a durable one, its backlog; each webhook endpoint under them.
    static func outputLines(_ statistics: DaemonStatistics) -> [String] {
        guard let outputs = statistics.outputs, !outputs.isEmpty else { return ["outputs:     none"] }
        var lines = ["outputs:"]
        let width = outputs.keys.map(\.count).max() ?? 0
        for (name, output) in outputs.sorted(by: { $0.key < $1.key }) {
            var parts = ["\(output.feed.rawValue)", output.health + (output.reason.map { " (\($0))" } ?? ""), "\(output.delivered) delivered"]
            if let backlog = output.backlog { parts.append("backlog \(backlog)") }
            if let last = output.lastEventID { parts.append("at event \(last)") }
            lines.append("  \(name.padding(toLength: width, withPad: " ", startingAt: 0))  \(parts.joined(separator: ", "))")
            guard name == "webhooks", let endpoints = statistics.webhooks else { continue }
            for (endpoint, figures) in endpoints.sorted(by: { $0.key < $1.key }) {
                var parts = [figures.failing ? "failing" : "ok", "\(figures.successes) sent"]
                if figures.failures > 0 { parts.append("\(figures.failures) failed") }
                if let backlog = figures.backlog { parts.append("backlog \(backlog)") }
                if let dead = figures.dead, dead > 0 { parts.append("\(dead) dead") }
                if figures.failing, let error = figures.lastError { parts.append("last error: \(error)") }
                lines.append("    \(endpoint): \(parts.joined(separator: ", "))")
            }
        }
        return lines
    }

    private static func duration(_ seconds: Double) -> String {
        let total = Int(seconds)
        if total < 60 { return "\(total)s" }
        if total < 3600 { return "\(total / 60)m\(total % 60)s" }
        return "\(total / 3600)h\(total % 3600 / 60)m"
    }
}
