import Foundation
import Herald
import HeraldClient
import Testing

extension IntegrationTests {
    /// `Last-Event-ID` and `?since=`: replay what a client missed, then live, with no gap and no duplicate.
    @Suite
    struct ResumeTests {
        func insertCourses(_ database: TestDatabase, _ codes: [String]) throws {
            for code in codes {
                try database.execute("INSERT INTO course (short_code, name) VALUES ($1, 'course')", parameters: [code])
            }
        }

        func events(in lines: [Substring]) -> [Event] {
            lines.compactMap { try? Event(payload: String($0)) }
        }

        func codes(_ events: [Event]) -> [String] {
            events.compactMap { $0.row?["short_code"]?.stringValue }
        }

        /// Then a browser's `EventSource` opened with `?since=` reconnects to
        /// the same URL with `Last-Event-ID` naming the event it got last:
        /// that one counts, or every reconnect replayed from the first `since`.
        @Test func sinceReplaysFromTheDaemonsMemoryThenContinuesLive() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database)
            let first = try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson&table=course")
            try insertCourses(database, ["A", "B", "C"])
            try await first.waitForLines(3)
            let seen = events(in: first.lines)

            let resumed = try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson&table=course&since=\(seen[0].id)")
            try await resumed.waitForLines(2)
            try insertCourses(database, ["D"])
            try await resumed.waitForLines(3)
            try await Task.sleep(for: .milliseconds(200))
            #expect(codes(events(in: resumed.lines)) == ["B", "C", "D"])

            let reconnected = try await RawStream(
                socketPath: daemon.socketPath, path: "/events?format=ndjson&table=course&since=\(seen[0].id)", headers: [("Last-Event-ID", seen[1].id)]
            )
            try await reconnected.waitForLines(2)
            try await Task.sleep(for: .milliseconds(200))
            #expect(codes(events(in: reconnected.lines)) == ["C", "D"], "Last-Event-ID counts before since")
        }

        @Test func lastEventIDResumesAnSSEStreamAcrossAGracefulRestart() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database)
            let first = try await RawStream(socketPath: daemon.socketPath, path: "/events?table=course")
            try insertCourses(database, ["A"])
            let text = try await first.text { $0.contains("\n\n") && $0.contains("data:") }
            let lastID = try #require(text.split(separator: "\n").first { $0.hasPrefix("id: ") }?.dropFirst(4))
            let stopped = try await daemon.stop()
            #expect(stopped.status == 0)
            try insertCourses(database, ["B", "C"])

            let restarted = try await SocketDaemon(database: database, socketPath: daemon.socketPath)
            let resumed = try await RawStream(socketPath: restarted.socketPath, path: "/events?table=course", headers: [("Last-Event-ID", String(lastID))])
            try insertCourses(database, ["D"])
            let replayed = try await resumed.text { $0.components(separatedBy: "data: ").count - 1 >= 3 }
            try await Task.sleep(for: .milliseconds(200))
            let data = resumed.lines.filter { $0.hasPrefix("data: ") }.compactMap { try? Event(payload: String($0.dropFirst(6))) }
            #expect(codes(data) == ["B", "C", "D"], "\(replayed)")
        }

        /// A daemon with no in-memory history, so that every resume reads the journal,
        /// and the events of courses A, B and C as a stream received them.
        func daemonWithoutHistoryAfterThreeCourses() async throws -> (TestDatabase, SocketDaemon, [Event]) {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database, arguments: ["--history", "0"])
            let first = try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson&table=course")
            try insertCourses(database, ["A", "B", "C"])
            try await first.waitForLines(3)
            return (database, daemon, events(in: first.lines))
        }

        @Test func anIDOlderThanTheMemoryReplaysFromTheJournal() async throws {
            let (database, daemon, seen) = try await daemonWithoutHistoryAfterThreeCourses()

            let resumed = try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson&table=course&since=\(seen[0].id)")
            try insertCourses(database, ["D"])
            try await waitFor { codes(events(in: resumed.lines)).contains("D") }
            try await Task.sleep(for: .milliseconds(200))
            let replay = codes(events(in: resumed.lines))
            #expect(replay == ["B", "C", "D"], "each once, in order")
        }

        /// Resuming from the middle of what one checkpoint covers: the
        /// replay started at the checkpoint, so the transactions delivered
        /// between it and the resumed one came again (A here). Now it starts
        /// where the resumed transaction's delivery step did, and skips what
        /// that step delivered before it.
        @Test func aReplayFromTheMiddleOfACheckpointsRangeRepeatsNothing() async throws {
            let (database, daemon, seen) = try await daemonWithoutHistoryAfterThreeCourses()

            let resumed = try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson&table=course&since=\(seen[1].id)")
            try insertCourses(database, ["D"])
            try await waitFor { codes(events(in: resumed.lines)).contains("D") }
            try await Task.sleep(for: .milliseconds(200))
            #expect(codes(events(in: resumed.lines)) == ["C", "D"], "each once, in order")
        }

        /// A herd: every client resumes from the journal at once after a
        /// restart. Each gets exactly what it missed, and they share the
        /// journal's reads: one lookup for the resumes that arrive together,
        /// one read of a range for all who replay it. Before, each resume
        /// looked its event up and read its pages alone, one after another.
        @Test func aHerdResumingFromTheJournalSharesItsReads() async throws {
            let (database, daemon, seen) = try await daemonWithoutHistoryAfterThreeCourses()
            // A graceful stop records a checkpoint of exactly what was delivered: no repeats on resuming.
            #expect(try await daemon.stop().status == 0)
            try insertCourses(database, ["D", "E"])
            let restarted = try await SocketDaemon(database: database, socketPath: daemon.socketPath, arguments: ["--history", "0"])

            let herd = 200
            let streams = try await withThrowingTaskGroup(of: (Int, RawStream).self) { group in
                for client in 0..<herd {
                    // A quarter were behind, still at the first event.
                    let since = client % 4 == 0 ? seen[0].id : seen[2].id
                    group.addTask { (client, try await RawStream(socketPath: restarted.socketPath, path: "/events?format=ndjson&table=course&since=\(since)")) }
                }
                return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
            for (client, stream) in streams {
                let missed = client % 4 == 0 ? ["B", "C", "D", "E"] : ["D", "E"]
                try await stream.waitForLines(missed.count)
                #expect(codes(events(in: stream.lines)) == missed, "client \(client)")
                #expect(!stream.lines.contains { $0.contains(#""error":"reset""#) }, "client \(client)")
            }
            try insertCourses(database, ["LIVE"])
            for stream in streams.values { try await waitFor { codes(events(in: stream.lines)).last == "LIVE" } }
            let replays = try #require(try await restarted.statistics().replays)
            #expect(replays.resumes == UInt64(herd))
            // How many resumes arrive together depends on the machine's pace; that some do, does not.
            #expect(replays.lookups < UInt64(herd / 2), "\(replays.lookups) lookups for \(herd) resumes")
            #expect(replays.pagesRead < UInt64(herd / 2) && replays.pagesRead + replays.pagesShared >= UInt64(herd), "\(replays)")
            print("herd of \(herd): \(replays)")
        }

        /// A replay whose filter passes nothing writes nothing while it reads
        /// the journal, so no failed write tells it that its client left. An
        /// outside tester's 200 clients that hung up right after the head kept
        /// the daemon reading the journal for 70 s, and another user's resume
        /// waited behind them for 84 s. A replay now ends at the next page.
        @Test func aReplayEndsWhenItsClientHangsUp() async throws {
            let (database, daemon, seen) = try await daemonWithoutHistoryAfterThreeCourses()
            // A statement each, so a journal row each: 60 pages of 500 rows.
            try database.execute("DO $$ BEGIN FOR i IN 1..30000 LOOP INSERT INTO course (short_code, name) VALUES ('Z' || i, 'filler'); END LOOP; END $$")
            let clients = 20
            for _ in 0..<clients {
                let client = try StalledClient(socketPath: daemon.socketPath, path: "/events?table=course&where=short_code.eq.NONE&since=\(seen[0].id)")
                // The head has come, so the replay has begun; the client hangs up at the end of the iteration.
                _ = try await client.readSlowly(untilBodyContains: "retry:", within: 10)
            }
            try await Task.sleep(for: .seconds(2))
            let replays = try #require(try await daemon.statistics().replays)
            #expect(replays.resumes == UInt64(clients))
            // Read to the end, each replay would take 60 pages; ended with its client, the few in flight
            // (pages another replay read are taken without waiting, so a few more than one or two).
            #expect(replays.pagesRead + replays.pagesShared <= UInt64(clients * 8), "\(replays)")
        }

        @Test func anUnknownIDGetsAResetAndMalformedOnesA400() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database)
            let stream = try await RawStream(socketPath: daemon.socketPath, path: "/events?since=999999999")
            let text = try await stream.text { $0.contains("event: reset") }
            #expect(text.contains(#""error":"reset""#))
            try insertCourses(database, ["LIVE"])
            _ = try await stream.text { $0.contains(#""short_code":"LIVE""#) }

            let malformed = try await daemon.get("/events?since=abc")
            #expect(malformed.status == 400)
            #expect(malformed.body.contains(#""parameter":"since""#))
            let header = try await daemon.get("/events", headers: [("Last-Event-ID", "12; DROP")])
            #expect(header.status == 400)
            #expect(try await daemon.get("/events", headers: [("Last-Event-ID", "+5")]).status == 400, "no id the daemon gave")
            #expect(try await daemon.get("/events?since=%2B5").status == 400)
            // One value each, as two Last-Event-ID headers get: which one counts must not depend on who reads.
            for twice in ["since=1&since=2", "format=sse&format=ndjson", "group=transaction&group=transaction"] {
                let refused = try await daemon.get("/events?\(twice)")
                #expect(refused.status == 400 && refused.body.contains("given twice"), "\(twice): \(refused.status) \(refused.body)")
            }
        }

        @Test func theClientResumesThroughASIGKILLWithNothingMissing() async throws {
            let database = try TestDatabase.create()
            var daemon = try await SocketDaemon(database: database)
            let subscriber = ResumingSubscriber(socketPath: daemon.socketPath, table: "course")
            try await daemon.waitForSubscribers(1, kind: "sse")
            try insertCourses(database, ["A", "B"])
            try await waitFor { subscriber.events.count == 2 }
            daemon.process.signal(SIGKILL)
            _ = try await daemon.process.finish()
            try insertCourses(database, ["C"])
            daemon = try await SocketDaemon(database: database, socketPath: daemon.socketPath)
            try insertCourses(database, ["D"])
            try await waitFor { codes(subscriber.events).contains("D") }
            let received = subscriber.events
            #expect(Set(codes(received)) == ["A", "B", "C", "D"])
            // Repeats are allowed after a SIGKILL, but only as the same event.
            let idsByCode = Dictionary(grouping: received, by: { $0.row?["short_code"]?.stringValue ?? "" }).mapValues { Set($0.map(\.id)) }
            #expect(idsByCode.values.allSatisfy { $0.count == 1 })
            #expect(subscriber.resets.isEmpty)
        }
    }
}
