import Foundation
import Herald
import Testing

extension IntegrationTests {
    /// A stalled client must not hurt anyone else, and many clients all get everything.
    @Suite
    struct SlowConsumerTests {
        @Test func aClientThatNeverReadsIsDroppedWhileOthersGetEveryEvent() async throws {
            let database = try TestDatabase.create()
            try database.execute("CREATE TABLE mark (id int PRIMARY KEY, note text)")
            let daemon = try await SocketDaemon(database: database)
            let stalled = try StalledClient(socketPath: daemon.socketPath)
            let reader = try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson")
            try await daemon.waitForSubscribers(1, kind: "sse")
            let memoryBefore = daemon.residentBytes

            try database.execute("INSERT INTO mark SELECT g, repeat('x', 200) FROM generate_series(1, 10000) g")
            try await reader.waitForLines(10_000)
            let counts = try reader.lines.map { try Event(payload: String($0)).count }
            #expect(counts == Array(1...10_000))

            let statistics = try await daemon.statistics()
            #expect(statistics.overflows == 1)
            #expect(statistics.subscribers == ["ndjson": 1])
            let memoryAfter = daemon.residentBytes
            #expect(memoryAfter - memoryBefore < 64 << 20, "daemon grew by \(memoryAfter - memoryBefore) bytes")

            // The stalled connection is closed, so it holds nothing in the daemon.
            let deadline = ContinuousClock.now + .seconds(10)
            while !stalled.isClosedByPeer {
                guard ContinuousClock.now < deadline else {
                    Issue.record("the stalled connection was not closed")
                    break
                }
                try await Task.sleep(for: .milliseconds(100))
            }
        }

        @Test func aClientThatReadsTooSlowlyGetsAnOverflowFrameThenTheConnectionCloses() async throws {
            let database = try TestDatabase.create()
            try database.execute("CREATE TABLE mark (id int PRIMARY KEY, note text)")
            let daemon = try await SocketDaemon(database: database, arguments: ["--subscriber-buffer", "128"])
            let lagging = try StalledClient(socketPath: daemon.socketPath)
            try await daemon.waitForSubscribers(1, kind: "sse")
            try database.execute("INSERT INTO mark SELECT g, repeat('x', 200) FROM generate_series(1, 3000) g")
            // About 400 kB/s: far slower than the burst, so it overflows, but it
            // keeps reading, so it is not cut off before the overflow frame.
            let (text, closedByPeer) = try await lagging.readSlowly()
            #expect(closedByPeer)
            #expect(try await daemon.statistics().overflows == 1)
            #expect(text.hasPrefix("HTTP/1.1 200 OK"))
            #expect(text.contains("event: INSERT"))
            let overflow = try #require(text.range(of: "event: overflow\ndata: {\"error\":\"overflow\",\"capacity\":128,"))
            // The overflow frame is the last thing on the stream (only HTTP chunk framing may follow).
            #expect(!text[overflow.upperBound...].contains("event:"))
            #expect(try await daemon.statistics().subscribers.isEmpty)
        }

        @Test func aThousandSubscribersEachGetEveryEventInOrder() async throws {
            let database = try TestDatabase.create()
            try database.execute("CREATE TABLE mark (id int PRIMARY KEY, score int)")
            let daemon = try await SocketDaemon(database: database)
            let streams = try await withThrowingTaskGroup(of: RawStream.self) { group in
                for index in 0..<1000 {
                    group.addTask {
                        try await RawStream(socketPath: daemon.socketPath, path: index % 2 == 0 ? "/events?format=ndjson" : "/events?format=ndjson&table=mark")
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            try await daemon.waitForSubscribers(1000, kind: "ndjson")

            try database.execute("INSERT INTO mark SELECT g, g FROM generate_series(1, 500) g")
            for stream in streams {
                try await stream.waitForLines(500, within: 60)
            }
            let reference = try streams[0].lines.map { try Event(payload: String($0)) }
            #expect(reference.map(\.count) == Array(1...500))
            #expect(reference.map { $0.new?["id"] } == (1...500).map { .number(JSONNumber(Int64($0))) })
            // Each event is serialized once, so every subscriber must hold the very same bytes.
            let expected = streams[0].lines
            for stream in streams.dropFirst() {
                #expect(stream.lines == expected)
            }
        }
    }
}
