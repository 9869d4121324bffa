import Foundation
import Herald
import Testing

extension IntegrationTests {
    /// What the daemon keeps in memory after a large statement has gone through.
    @Suite
    struct MemoryTests {
        /// Anonymous (heap) memory of the daemon, in bytes.
        static func anonymousBytes(_ daemon: SocketDaemon) -> Int {
            let status = (try? String(contentsOfFile: "/proc/\(daemon.process.process.processIdentifier)/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("RssAnon:") } ?? ""
            return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
        }

        @Test func theHeapABurstLeftIsHandedBackOnceTheDaemonIsQuiet() async throws {
            let database = try TestDatabase.create()
            // No resume history, so that what the statement took is all transient.
            let daemon = try await SocketDaemon(database: database, arguments: ["--history", "0"])
            let before = Self.anonymousBytes(daemon)
            try database.execute("INSERT INTO student (first_name, last_name) SELECT repeat('f', 40), repeat('x', 40) || g FROM generate_series(1, 50000) AS g")
            try await waitFor { try await daemon.statistics().changeCount == 50_000 }
            let peak = Self.anonymousBytes(daemon)
            // Five quiet seconds, then the trim.
            try await waitFor(seconds: 20) { Self.anonymousBytes(daemon) < before + 8 << 20 } failure: {
                "the daemon kept \((Self.anonymousBytes(daemon) - before) >> 20) MiB after the burst (\(before >> 20) MiB before, \(peak >> 20) MiB at its end)"
            }
        }
    }
}
