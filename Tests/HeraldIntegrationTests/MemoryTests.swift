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

        /// Replays of large rows, the pages kept for other readers of them,
        /// and the streams that read them free memory with no change
        /// published: kept pages stayed until the next replay, and the heap
        /// was trimmed only after changes. An outside tester's daemon held
        /// 550 MB of heap with no client after three fast replays of 104 rows
        /// of 1 MB, 270 MB of it in use.
        @Test func aFewLargeRowsWithNoClientAreHandedBack() async throws {
            let database = try TestDatabase.create()
            try database.execute("CREATE TABLE note (id serial PRIMARY KEY, body text)")
            let daemon = try await SocketDaemon(database: database, arguments: ["--history", "0"])
            let before = Self.anonymousBytes(daemon)
            // Fewer changes than a quiet spell may count, and no client to move the activity.
            try database.execute("DO $$ BEGIN FOR i IN 1..40 LOOP INSERT INTO note (body) VALUES (repeat('x', 4000000)); END LOOP; END $$")
            try await waitFor(seconds: 60) { try await daemon.statistics().changeCount >= 40 }
            let peak = Self.anonymousBytes(daemon)
            try await waitFor(seconds: 30) { Self.anonymousBytes(daemon) < before + 32 << 20 } failure: {
                "the daemon kept \((Self.anonymousBytes(daemon) - before) >> 20) MiB after 40 rows of 4 MB with no client (\(before >> 20) MiB before, \(peak >> 20) MiB at their end)"
            }
            print("40 rows of 4 MB with no client: \(before >> 20) MiB of heap before, \(peak >> 20) MiB at their end, \(Self.anonymousBytes(daemon) >> 20) MiB after")
        }

        @Test func replaysOfLargeRowsHandTheirMemoryBack() async throws {
            let database = try TestDatabase.create()
            try database.execute("CREATE TABLE note (id serial PRIMARY KEY, body text)")
            // No resume history: the replays read the journal, and the daemon keeps no row by design.
            let daemon = try await SocketDaemon(database: database, arguments: ["--history", "0"])
            let live = try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson&table=course")
            try database.execute("INSERT INTO course (short_code, name) VALUES ('MARK', 'mark')")
            try await live.waitForLines(1)
            let mark = try #require(live.lines.compactMap { try? Event(payload: String($0)) }.first?.id)
            try database.execute("DO $$ BEGIN FOR i IN 1..60 LOOP INSERT INTO note (body) VALUES (repeat('x', 1000000)); END LOOP; END $$")
            try await waitFor(seconds: 60) { try await daemon.statistics().changeCount >= 61 }
            // What the writes took is handed back once two looks 5 s apart saw nothing move.
            try await Task.sleep(for: .seconds(12))
            let before = Self.anonymousBytes(daemon)

            var replays: [RawStream] = []
            for _ in 0..<3 {
                replays.append(try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson&table=note&since=\(mark)"))
            }
            for replay in replays { try await replay.waitForLines(60, within: 120) }
            let peak = Self.anonymousBytes(daemon)
            replays = []
            // A user goes on writing a few rows a second: that is not load, and the memory comes back.
            let writer = Task {
                for _ in 0..<300 where !Task.isCancelled {
                    try database.execute("INSERT INTO course (short_code, name) VALUES ('STEADY', 'steady')")
                    try await Task.sleep(for: .milliseconds(200))
                }
            }
            defer { writer.cancel() }
            // Kept pages live 10 s and are swept within 20; the heap is trimmed five quiet seconds later.
            try await waitFor(seconds: 45) { Self.anonymousBytes(daemon) < before + 32 << 20 } failure: {
                "the daemon kept \((Self.anonymousBytes(daemon) - before) >> 20) MiB after three replays of 60 MB had ended, while 5 rows a second were written (\(before >> 20) MiB before, \(peak >> 20) MiB at their end)"
            }
            print("replays of 60 rows of 1 MB: \(before >> 20) MiB of heap before, \(peak >> 20) MiB at their end, \(Self.anonymousBytes(daemon) >> 20) MiB after")
        }
    }
}
