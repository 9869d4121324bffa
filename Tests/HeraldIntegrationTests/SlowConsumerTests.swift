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
            // The stalled client's mailbox overflowed; on a loaded machine the reader's may too,
            // and it reads on from the history, as the counts above show.
            #expect(statistics.overflows >= 1)
            #expect(statistics.subscribers == ["ndjson": 1])
            let memoryAfter = daemon.residentBytes
            #expect(memoryAfter - memoryBefore < 64 << 20, "daemon grew by \(memoryAfter - memoryBefore) bytes")

            // The stalled connection is closed, so it holds nothing in the daemon.
            let deadline = ContinuousClock.now + .seconds(10)
            while !stalled.isHungUpByPeer {
                guard ContinuousClock.now < deadline else {
                    Issue.record("the stalled connection was not closed")
                    break
                }
                try await Task.sleep(for: .milliseconds(100))
            }
        }

        /// A client that keeps reading, however much slower than a burst, is never dropped: past
        /// its buffer it reads on from the daemon's history, while a stalled client beside it is
        /// closed once its writes stall.
        @Test func aClientThatReadsSlowerThanABurstKeepsItsStreamAndGetsEveryEventInOrder() async throws {
            let database = try TestDatabase.create()
            try database.execute("CREATE TABLE mark (id int PRIMARY KEY, note text)")
            let daemon = try await SocketDaemon(database: database, arguments: ["--subscriber-buffer", "128"])
            let stalled = try StalledClient(socketPath: daemon.socketPath, path: "/events?table=mark")
            let lagging = try StalledClient(socketPath: daemon.socketPath, path: "/events?format=ndjson&table=mark")
            try await daemon.waitForSubscribers(1, kind: "ndjson")
            try database.execute("INSERT INTO mark SELECT g, repeat('x', 200) FROM generate_series(1, 3000) g")
            // About 400 kB/s: far slower than the burst, so it falls behind its 128-event buffer again and again.
            let (body, closedByPeer) = try await lagging.readSlowly(untilBodyContains: #""id":3000,"#)
            #expect(!closedByPeer)
            #expect(!body.contains("overflow"))
            let rows = rowIDs(body.split(separator: "\n").compactMap { try? Event(payload: String($0)) })
            #expect(rows == Array(1...3000), "every row once, in order")
            #expect(try await daemon.statistics().overflows >= 1, "the reader never fell behind its buffer, so this proves nothing")
            try await waitFor(seconds: 10) { stalled.isHungUpByPeer } failure: { "the stalled client was not closed" }
            // Caught up, it is an ordinary stream again: quiet for longer than the stall timeout, it stays open.
            try await Task.sleep(for: .seconds(3))
            try database.execute("INSERT INTO mark VALUES (3001, 'after the quiet')")
            let (later, closedLater) = try await lagging.readSlowly(untilBodyContains: #""id":3001,"#, within: 10)
            #expect(!closedLater && later.contains(#""id":3001,"#), "the stream was closed while it had nothing to send")
        }

        /// At the defaults (a 4,096-event buffer, a history of 100,000 events), a reader at the
        /// pace of a simple Python client (about 15 µs an event) reads a batch job's 100,000-row
        /// statement whole, in order, with no overflow, beside a client that never reads.
        @Test func aReaderAtAPythonClientsPaceGetsAllOfAHundredThousandRowStatement() async throws {
            let database = try TestDatabase.create()
            try database.execute("CREATE TABLE mark (id int PRIMARY KEY, note text)")
            let daemon = try await SocketDaemon(database: database)
            let stalled = try StalledClient(socketPath: daemon.socketPath, path: "/events?table=mark")
            let reader = try StalledClient(socketPath: daemon.socketPath, path: "/events?format=ndjson&table=mark")
            try await daemon.waitForSubscribers(1, kind: "sse")
            try await daemon.waitForSubscribers(1, kind: "ndjson")
            try database.execute("INSERT INTO mark SELECT g, repeat('x', 100) FROM generate_series(1, 100000) g")
            // 64 KiB holds about 250 of these lines: 15 µs each is about 4 ms a read.
            let (body, closedByPeer) = try await reader.readSlowly(
                untilBodyContains: #""id":100000,"#, chunk: 64 << 10, pause: .milliseconds(4), within: 120
            )
            #expect(!closedByPeer)
            #expect(!body.contains("overflow"))
            let rows = rowIDs(body.split(separator: "\n").compactMap { try? Event(payload: String($0)) })
            #expect(rows.count == 100_000 && rows == Array(1...100_000), "\(rows.count) rows")
            #expect(try await daemon.statistics().overflows >= 1, "the reader never fell behind its buffer, so this proves nothing")
            try await waitFor(seconds: 10) { stalled.isHungUpByPeer } failure: { "the stalled client was not closed" }
        }

        /// One that falls behind the history itself gets `event: overflow`, and resumes from the
        /// journal with the last id it had: nothing is missing, nothing repeated.
        @Test func aClientSlowerThanTheHistoryGetsAnOverflowFrameAndResumesFromTheJournal() async throws {
            let database = try TestDatabase.create()
            try database.execute("CREATE TABLE mark (id int PRIMARY KEY, note text)")
            let daemon = try await SocketDaemon(database: database, arguments: ["--subscriber-buffer", "128", "--history", "500"])
            let lagging = try StalledClient(socketPath: daemon.socketPath, path: "/events?format=ndjson&table=mark")
            try await daemon.waitForSubscribers(1, kind: "ndjson")
            try database.execute("INSERT INTO mark SELECT g, repeat('x', 200) FROM generate_series(1, 3000) g")
            let (body, closedByPeer) = try await lagging.readSlowly(untilBodyContains: #""error":"overflow""#)
            let lines = body.split(separator: "\n")
            let overflow = try #require(lines.last { $0.contains(#""error":"overflow""#) }, "no overflow frame")
            #expect(overflow.contains("fell behind the daemon's history of 500 events or "), "\(overflow)")
            let first = lines.compactMap { try? Event(payload: String($0)) }
            let lastID = try #require(first.last?.id, "no event before the overflow")
            _ = closedByPeer

            let resumed = try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson&table=mark&since=\(lastID)")
            try await resumed.waitForLines(3000 - first.count)
            let rest = resumed.lines.compactMap { try? Event(payload: String($0)) }
            let rows = rowIDs(first + rest)
            #expect(rows == Array(1...3000), "every row once, in order")
        }

        /// The `id` column of each event's new row.
        private func rowIDs(_ events: [Event]) -> [Int] {
            events.compactMap { event in
                guard case .number(let number)? = event.new?["id"] else { return nil }
                return number.int64Value.map(Int.init)
            }
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
