import Foundation
import Herald
import HeraldClient
import Synchronization
import Testing

extension IntegrationTests {
    /// `?group=transaction`, `HeraldClient.transactions` and
    /// `Broker.transactions`: one message per commit, holding its rows in order.
    @Suite
    struct TransactionGroupTests {
        /// The `transaction` messages of an SSE stream's text.
        static func groups(inSSE text: String) throws -> [(id: String?, group: TransactionGroup)] {
            var parser = ServerSentEventParser()
            return try parser.feed(Array(text.utf8)).filter { $0.type == "transaction" }.map { ($0.id, try TransactionGroup(payload: $0.data)) }
        }

        static func groups(inNDJSON lines: [Substring]) throws -> [TransactionGroup] {
            try lines.map { try TransactionGroup(payload: String($0)) }
        }

        static func codes(_ group: TransactionGroup) -> [String] {
            group.events.compactMap { $0.row?["short_code"]?.stringValue }
        }

        @Test func aThousandRowTransactionIsOneMessageThatArrivesAtItsCommit() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database)
            let sse = try await RawStream(socketPath: daemon.socketPath, path: "/events?group=transaction")
            let courses = try await RawStream(socketPath: daemon.socketPath, path: "/events?group=transaction&table=course&format=ndjson")
            // Parked and idle: the rows come by notification and reference, in several reads.
            try database.execute("""
                BEGIN;
                INSERT INTO student (first_name, last_name) SELECT 'S', g::text FROM generate_series(1, 999) AS g;
                INSERT INTO course (short_code, name) VALUES ('ONE', 'first');
                COMMIT;
                """)
            // Nothing else is committed: the group must arrive on its own end, not on the next transaction's start.
            let text = try await sse.text { (try? Self.groups(inSSE: $0).count) == 1 }
            let first = try #require(try Self.groups(inSSE: text).first)
            #expect(first.group.count == 1000)
            #expect(first.group.events.map(\.operation) == Array(repeating: .insert, count: 1000))
            #expect(Set(first.group.events.map(\.transactionID)) == [first.group.transactionID])
            #expect(first.group.events.map(\.count) == Array(1...1000), "every row, in order")
            #expect(first.id == first.group.lastEventID)
            try await courses.waitForLines(1)
            #expect(try Self.groups(inNDJSON: courses.lines).map(Self.codes) == [["ONE"]], "the filter keeps the course row only")

            try database.execute("UPDATE student SET last_name = 'x' WHERE last_name = '1'")
            try database.execute("UPDATE course SET name = 'second' WHERE short_code = 'ONE'")
            let after = try await sse.text { (try? Self.groups(inSSE: $0).count) == 3 }
            #expect(try Self.groups(inSSE: after).map(\.group.count) == [1000, 1, 1])
            try await courses.waitForLines(2)
            try await Task.sleep(for: .milliseconds(200))
            let courseGroups = try Self.groups(inNDJSON: courses.lines)
            #expect(courseGroups.map(\.count) == [1, 1], "a transaction the filter passes nothing of makes no message")
            #expect(courseGroups.last?.events.first?.operation == .update)
        }

        @Test func interleavedTransactionsArriveWholeInCommitOrder() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database)
            let stream = try await RawStream(socketPath: daemon.socketPath, path: "/events?group=transaction&table=course&format=ndjson")
            let early = try database.connect()
            let late = try database.connect()
            _ = try early.execute("BEGIN")
            _ = try early.execute("INSERT INTO course (short_code, name) VALUES ('A1', 'a')")
            _ = try late.execute("BEGIN")
            _ = try late.execute("INSERT INTO course (short_code, name) VALUES ('B1', 'b')")
            _ = try early.execute("INSERT INTO course (short_code, name) VALUES ('A2', 'a')")
            _ = try late.execute("INSERT INTO course (short_code, name) VALUES ('B2', 'b')")
            _ = try late.execute("COMMIT")
            try await stream.waitForLines(1)
            #expect(try Self.groups(inNDJSON: stream.lines).map(Self.codes) == [["B1", "B2"]])
            _ = try early.execute("INSERT INTO course (short_code, name) VALUES ('A3', 'a')")
            _ = try early.execute("COMMIT")
            try await stream.waitForLines(2)
            // A rolled-back transaction makes no message.
            try database.execute("BEGIN; INSERT INTO course (short_code, name) VALUES ('R1', 'r'); ROLLBACK")
            try database.execute("INSERT INTO course (short_code, name) VALUES ('C1', 'c')")
            try await stream.waitForLines(3)
            try await Task.sleep(for: .milliseconds(200))
            #expect(try Self.groups(inNDJSON: stream.lines).map(Self.codes) == [["B1", "B2"], ["A1", "A2", "A3"], ["C1"]])
        }

        @Test func aBacklogSweptFromTheJournalStillArrivesOneMessagePerTransaction() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database)
            let stream = try await RawStream(socketPath: daemon.socketPath, path: "/events?group=transaction&table=course&format=ndjson")
            // Forty transactions from as many connections at once: the daemon reads them by sweeping, in pages.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<8 {
                    group.addTask {
                        let connection = try database.connect()
                        for round in 0..<5 {
                            _ = try connection.execute("""
                                INSERT INTO course (short_code, name)
                                SELECT 'W\(writer)R\(round)N' || g, 'w' FROM generate_series(1, 60) AS g
                                """)
                        }
                    }
                }
                try await group.waitForAll()
            }
            try await stream.waitForLines(40)
            try await Task.sleep(for: .milliseconds(200))
            let groups = try Self.groups(inNDJSON: stream.lines)
            #expect(groups.count == 40)
            #expect(groups.allSatisfy { $0.count == 60 && Set($0.events.map(\.transactionID)).count == 1 })
            #expect(Set(groups.map(\.transactionID)).count == 40, "no transaction split in two")
        }

        @Test func lastEventIDResumesAfterTheWholeTransactionFromMemoryAndFromTheJournal() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database)
            let first = try await RawStream(socketPath: daemon.socketPath, path: "/events?group=transaction&table=course")
            try database.execute("INSERT INTO course (short_code, name) VALUES ('A1', 'a'), ('A2', 'a')")
            let text = try await first.text { (try? Self.groups(inSSE: $0).count) == 1 }
            let lastID = try #require(try Self.groups(inSSE: text).first?.id)
            try database.execute("INSERT INTO course (short_code, name) VALUES ('B1', 'b'), ('B2', 'b')")
            try database.execute("INSERT INTO student (first_name, last_name) VALUES ('not', 'a course')")
            try database.execute("INSERT INTO course (short_code, name) VALUES ('C1', 'c')")

            let fromMemory = try await RawStream(
                socketPath: daemon.socketPath, path: "/events?group=transaction&table=course", headers: [("Last-Event-ID", lastID)]
            )
            let replayed = try await fromMemory.text { (try? Self.groups(inSSE: $0).count) == 2 }
            #expect(try Self.groups(inSSE: replayed).map { Self.codes($0.group) } == [["B1", "B2"], ["C1"]])

            let stopped = try await daemon.stop()
            #expect(stopped.status == 0)
            try database.execute("INSERT INTO course (short_code, name) VALUES ('D1', 'd'), ('D2', 'd')")
            let restarted = try await SocketDaemon(database: database, socketPath: daemon.socketPath)
            let fromJournal = try await RawStream(
                socketPath: restarted.socketPath, path: "/events?group=transaction&table=course", headers: [("Last-Event-ID", lastID)]
            )
            try database.execute("INSERT INTO course (short_code, name) VALUES ('E1', 'e')")
            let resumed = try await fromJournal.text { (try? Self.groups(inSSE: $0).count) == 4 }
            try await Task.sleep(for: .milliseconds(200))
            #expect(
                try Self.groups(inSSE: resumed).map { Self.codes($0.group) } == [["B1", "B2"], ["C1"], ["D1", "D2"], ["E1"]],
                "each transaction once and whole, from the journal and then live"
            )
        }

        @Test func groupingIsRefusedWithoutAJournalAndForAnUnknownValue() async throws {
            let database = try TestDatabase.create(durability: .notifyOnly)
            let daemon = try await SocketDaemon(database: database)
            let notifyOnly = try await daemon.get("/events?group=transaction")
            #expect(notifyOnly.status == 400)
            #expect(notifyOnly.body.contains("group_needs_journal"), "\(notifyOnly.body)")
            let unknown = try await daemon.get("/events?group=statement")
            #expect(unknown.status == 400)
            #expect(unknown.body.contains("group is transaction"), "\(unknown.body)")
        }

        @Test func theClientDeliversTransactionsAndResumesThemAcrossARestart() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database)
            let received = Received()
            let reader = Task {
                for try await group in daemon.client.transactions(EventFilter(tables: [TableName(name: "course")])) {
                    received.append(group)
                }
            }
            defer { reader.cancel() }
            try await daemon.waitForSubscribers(1, kind: "sse")
            try database.execute("INSERT INTO course (short_code, name) SELECT 'A' || g, 'a' FROM generate_series(1, 300) AS g")
            try await waitFor { received.groups.count == 1 }
            #expect(received.groups.first?.count == 300)

            _ = try await daemon.stop()
            try database.execute("INSERT INTO course (short_code, name) VALUES ('B1', 'b'), ('B2', 'b')")
            let restarted = try await SocketDaemon(database: database, socketPath: daemon.socketPath)
            try await waitFor(seconds: 20) { received.groups.count == 2 }
            try await Task.sleep(for: .milliseconds(200))
            withExtendedLifetime(restarted) {}
            #expect(received.groups.map(\.count) == [300, 2])
            #expect(received.groups.last.map(Self.codes) == ["B1", "B2"])
        }

        @Test func inProcessTransactionsEndAtCommitAndKeepOnlyWhatTheFilterPasses() async throws {
            let database = try TestDatabase.create()
            let running = try await RunningListener(database: database)
            let transactions = running.broker.transactions(EventFilter(tables: [TableName(name: "course")]))
            let received = Received()
            let reader = Task {
                for try await group in transactions { received.append(group) }
            }
            defer { reader.cancel() }
            try database.execute("""
                BEGIN;
                INSERT INTO course (short_code, name) SELECT 'A' || g, 'a' FROM generate_series(1, 500) AS g;
                INSERT INTO student (first_name, last_name) VALUES ('not', 'a course');
                COMMIT;
                """)
            try await waitFor { received.groups.count == 1 }
            #expect(received.groups.first?.count == 500)
            #expect(received.groups.first?.events.allSatisfy { $0.table.name == "course" } == true)
            try await running.stop()
        }

        final class Received: Sendable {
            private let state = Mutex<[TransactionGroup]>([])
            func append(_ group: TransactionGroup) { state.withLock { $0.append(group) } }
            var groups: [TransactionGroup] { state.withLock { $0 } }
        }
    }
}
