import Foundation
import Herald
import HeraldPostgres
import Synchronization
import Testing

extension IntegrationTests {
    /// Webhooks against real HTTP receivers: signing, retries, dead letters,
    /// SIGKILL, two daemons sharing the work, isolation and order.
    @Suite
    struct WebhookTests {
        static let secret = "whsec_" + Data((0..<32).map { UInt8($0 * 7 % 251) }).base64EncodedString()
        static let oldSecret = "whsec_" + Data((0..<32).map { UInt8($0 * 13 % 251) }).base64EncodedString()

        struct Endpoint {
            var name: String
            var url: String
            var extra: [String] = []
        }

        /// A configuration file with these endpoints; the secret sits in a file of its own.
        func configuration(_ endpoints: [Endpoint], secrets: [String] = [secret]) throws -> String {
            let directory = FileManager.default.temporaryDirectory.appending(path: "pgherald-webhooks-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let secretFile = directory.appending(path: "secret").path
            try (secrets.joined(separator: "\n") + "\n").write(toFile: secretFile, atomically: true, encoding: .utf8)
            var text = "webhooks:\n"
            for endpoint in endpoints {
                text += "  \(endpoint.name):\n    url: \(endpoint.url)\n    secret_file: \(secretFile)\n"
                text += endpoint.extra.map { "    \($0)\n" }.joined()
            }
            let path = directory.appending(path: "pgherald.yaml").path
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }

        func insertCourses(_ database: TestDatabase, _ count: Int, prefix: String) throws {
            for index in 0..<count {
                try database.execute("INSERT INTO course (short_code, name) VALUES ($1, 'course')", parameters: ["\(prefix)\(index)"])
            }
        }

        func journalIDs(_ database: TestDatabase) throws -> Set<String> {
            // A statement's events share journal rows, separated by U+001E.
            Set(try database.execute("SELECT e::json ->> 'id' FROM pgherald.journal, unnest(string_to_array(event, chr(30))) AS e").rows.compactMap { $0[0] })
        }

        func command(_ arguments: [String], config: String, database: TestDatabase) async throws -> (status: Int32, stdout: String, stderr: String) {
            try await DaemonProcess(["webhooks"] + arguments + ["--config", config, "--db", database.connInfo]).finish()
        }

        @Test func deliversSignedEventsWithTheSocketsBodyAndKeepsSecretsOutOfEveryOutput() async throws {
            let database = try TestDatabase.create()
            let receiver = try await WebhookReceiver()
            let config = try configuration([Endpoint(name: "orders", url: receiver.url(), extra: ["table: course"])], secrets: [Self.secret, Self.oldSecret])
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config, "--log-level", "debug"])
            let stream = try await RawStream(socketPath: daemon.socketPath, path: "/events?table=course&format=ndjson")
            try insertCourses(database, 3, prefix: "S")
            try database.execute("INSERT INTO student (first_name, last_name) VALUES ('not', 'sent')") // another table: filtered out
            let requests = try await receiver.wait { $0.count >= 3 }
            try await Task.sleep(for: .milliseconds(300))
            #expect(receiver.requests.count == 3, "only course events: \(receiver.requests.map(\.text))")

            try await stream.waitForLines(3)
            let streamed = try stream.lines.map { line in (text: String(line), event: try Event(payload: String(line))) }
            for (request, (text, event)) in zip(requests.sorted { $0.id < $1.id }, streamed.sorted { $0.event.id < $1.event.id }) {
                #expect(request.path == "/hook")
                #expect(request.headers["content-type"] == "application/json")
                #expect(request.headers["user-agent"]?.hasPrefix("pgherald/") == true)
                #expect(request.id == event.id)
                // Both secrets of the rotation verify, each on its own.
                #expect(StandardWebhooksVerifier.verify(request, secret: Self.secret))
                #expect(StandardWebhooksVerifier.verify(request, secret: Self.oldSecret))
                #expect(!StandardWebhooksVerifier.verify(request, secret: "whsec_" + Data(repeating: 9, count: 32).base64EncodedString()))
                // The socket's bytes, but for count: that is one daemon's counter, and deliveries are shared by all.
                let socketJSON = text.replacingOccurrences(of: "\"count\":\(event.count),", with: "\"count\":0,")
                #expect(request.text == socketJSON)
            }

            // send-test posts a signed test event outside the queue.
            let test = try await command(["send-test", "orders"], config: config, database: database)
            #expect(test.status == 0, "\(test.stdout)\(test.stderr)")
            let testRequest = try await receiver.wait { $0.contains { $0.id.hasPrefix("test-") } }.first { $0.id.hasPrefix("test-") }!
            #expect(StandardWebhooksVerifier.verify(testRequest, secret: Self.secret))
            #expect(testRequest.text.contains("\"table\":\"test\""))

            let metrics = try await daemon.get("/metrics").body
            #expect(metrics.contains(#"pgherald_webhook_successes_total{endpoint="orders"} 3"#), "\(metrics)")
            #expect(metrics.contains(#"pgherald_webhook_latency_seconds_count{endpoint="orders"} 3"#))
            // No secret anywhere: logs, /stats, /metrics, check-config, list, dead, --help.
            var outputs = [try await daemon.get("/stats").body, metrics, test.stdout, test.stderr]
            for arguments in [["list"], ["dead", "--json"], ["--help"], ["send-test", "--help"]] {
                let result = try await command(arguments, config: config, database: database)
                outputs += [result.stdout, result.stderr]
            }
            let check = try await DaemonProcess(["check-config", config]).finish()
            outputs += [check.stdout, check.stderr]
            #expect(check.stdout.contains("webhooks.orders.secret_file: (2 from"))
            let stopped = try await daemon.stop()
            outputs += [stopped.stdout, stopped.stderr]
            #expect(stopped.stderr.contains("delivered"), "debug logs were captured")
            for secret in [Self.secret, Self.oldSecret] {
                let key = String(secret.dropFirst("whsec_".count))
                for output in outputs { #expect(!output.contains(key)) }
            }
        }

        @Test func retriesWithGrowingGapsAndHonoursRetryAfter() async throws {
            let database = try TestDatabase.create()
            let receiver = try await WebhookReceiver()
            receiver.answer { request, attempt in
                let first = request.text.contains("\"R0\"")
                if first { return attempt < 3 ? .status(503) : .status(200) }
                return attempt == 1 ? .status(429, headers: ["Retry-After": "2"]) : .status(200)
            }
            let config = try configuration([Endpoint(name: "flaky", url: receiver.url())])
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            try insertCourses(database, 1, prefix: "R")
            let first = try await receiver.wait { $0.count >= 3 }
            #expect(Set(first.map(\.id)).count == 1, "every attempt carries the same webhook-id")
            let gaps = zip(first.dropFirst(), first).map { $0.at - $1.at }
            // Each wait is at least its step's lower half; that they never shrink is
            // RetrySchedule's own test: here a retry made late by a loaded machine
            // (one was, by 1.5 s, in a CI run) would make the first gap the longer.
            #expect(gaps[0] >= .milliseconds(450) && gaps[1] >= .milliseconds(950), "\(gaps)")

            try insertCourses(database, 1, prefix: "T")
            let all = try await receiver.wait { $0.count >= 5 }
            let throttled = all.suffix(2)
            #expect(throttled.last!.at - throttled.first!.at >= .milliseconds(1950), "Retry-After: 2 was not honoured")
            try await Task.sleep(for: .milliseconds(300))
            #expect(receiver.requests.count == 5, "delivered events are not sent again")
            let statistics = try await daemon.statistics()
            let figures = try #require(statistics.webhooks?["flaky"])
            #expect(figures.attempts == 5 && figures.successes == 2 && figures.retries == 3)
        }

        /// A filter naming a column the table lacks would match nothing, so its events would vanish:
        /// check-config --connect, serve's start and a reload each refuse it, naming the column.
        @Test func aFilterOnAColumnThatDoesNotExistIsRefusedEverywhere() async throws {
            let database = try TestDatabase.create()
            let receiver = try await WebhookReceiver()
            let bad = try configuration([Endpoint(name: "typo", url: receiver.url("/typo"), extra: ["table: course", "where: [nmae.eq.Drama]"])])
            let good = try configuration([Endpoint(name: "typo", url: receiver.url("/typo"), extra: ["table: course", "where: [name.eq.Drama]"])])

            let check = try await DaemonProcess(["check-config", bad, "--connect"], environment: ["PGHERALD_DATABASE": database.connInfo]).finish(within: 30)
            #expect(check.status == 78, "\(check.stdout)\(check.stderr)")
            #expect(check.stderr.contains("webhooks.typo.where: column nmae does not exist in table public.course"), "\(check.stderr)")
            let checkGood = try await DaemonProcess(["check-config", good, "--connect"], environment: ["PGHERALD_DATABASE": database.connInfo]).finish(within: 30)
            #expect(checkGood.status == 0, "\(checkGood.stderr)")

            let serve = try await DaemonProcess([
                "serve", "--db", database.connInfo, "--config", bad, "--socket", SocketDaemon.temporarySocketPath(), "--log-format", "logfmt",
            ]).finish(within: 30)
            #expect(serve.status != 0, "serve started with a filter that matches nothing")
            #expect(serve.stderr.contains("column nmae does not exist"), "\(serve.stderr)")

            // A reload that brings the typo keeps the endpoint as it was, and says why.
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", good, "--log-format", "logfmt"])
            try FileManager.default.removeItem(atPath: good)
            try FileManager.default.copyItem(atPath: bad, toPath: good)
            daemon.process.signal(SIGHUP)
            try await Task.sleep(for: .seconds(1.5))
            try database.execute("INSERT INTO course (short_code, name) VALUES ('TY1', 'Drama')")
            let requests = try await receiver.wait { $0.count >= 1 }
            #expect(requests.count == 1)
            let stopped = try await daemon.stop()
            #expect(stopped.stderr.contains("the reloaded webhook endpoints are refused") && stopped.stderr.contains("nmae"), "\(stopped.stderr)")
        }

        /// Daemons on one database share an endpoint's feed by name: a second daemon whose endpoint of
        /// that name filters differently would take events the first one's receiver never gets.
        @Test func aSecondDaemonWithAnotherDefinitionOfAnEndpointRefusesToStartOnIt() async throws {
            let database = try TestDatabase.create()
            let receiver = try await WebhookReceiver()
            let first = try configuration([Endpoint(name: "shared", url: receiver.url("/shared"), extra: ["table: course", "where: [name.eq.First]"])])
            let other = try configuration([Endpoint(name: "shared", url: receiver.url("/shared"), extra: ["table: course", "where: [name.eq.Other]"])])
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", first])

            let refused = try await DaemonProcess([
                "serve", "--db", database.connInfo, "--config", other, "--name", "second",
                "--socket", SocketDaemon.temporarySocketPath(), "--log-format", "logfmt",
            ]).finish(within: 30)
            #expect(refused.status != 0, "a second definition of the endpoint was accepted")
            #expect(refused.stderr.contains("webhooks.shared: the daemon named 'default'"), "\(refused.stderr)")
            #expect(refused.stderr.contains("where=name.eq.First") && refused.stderr.contains("where=name.eq.Other"), "\(refused.stderr)")
            #expect(refused.stderr.contains("or another name"), "\(refused.stderr)")

            // The same definition shares the feed; every event reaches the receiver once.
            let twin = try await SocketDaemon(database: database, arguments: ["--config", first, "--name", "twin"])
            try database.execute("INSERT INTO course (short_code, name) VALUES ('F1', 'First'), ('O1', 'Other')")
            let requests = try await receiver.wait { $0.count >= 1 }
            try await Task.sleep(for: .seconds(1))
            #expect(receiver.requests.count == 1 && String(decoding: requests[0].body, as: UTF8.self).contains("F1"), "\(receiver.requests.map { String(decoding: $0.body, as: UTF8.self) })")
            _ = try await twin.stop()
            _ = try await daemon.stop()

            // With the daemons that set it stopped, a new definition takes the feed over.
            let redefined = try await SocketDaemon(database: database, arguments: ["--config", other, "--name", "second", "--log-format", "logfmt"])
            try database.execute("INSERT INTO course (short_code, name) VALUES ('O2', 'Other')")
            _ = try await receiver.wait { $0.contains { String(decoding: $0.body, as: UTF8.self).contains("O2") } }
            let stopped = try await redefined.stop()
            #expect(stopped.stderr.contains("webhook endpoint redefined"), "\(stopped.stderr)")
        }

        @Test func aPermanentRefusalIsDeadLetteredAndReplayDeliversItAndReloadAddsEndpoints() async throws {
            let database = try TestDatabase.create()
            let receiver = try await WebhookReceiver()
            let refused = Mutex(true)
            receiver.answer { request, _ in
                request.path == "/strict" && refused.withLock({ $0 }) ? .status(400) : .status(200)
            }
            let config = try configuration([Endpoint(name: "strict", url: receiver.url("/strict"))])
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            try insertCourses(database, 1, prefix: "D")
            try await receiver.wait { $0.count >= 1 }
            var dead = ""
            try await waitFor(seconds: 10) {
                dead = try await command(["dead", "--json"], config: config, database: database).stdout
                return dead.contains("\"endpoint\":\"strict\"")
            }
            #expect(dead.contains("\"lastStatus\":400"))
            #expect(dead.contains("answer 400"))
            #expect(dead.contains("not retried"))
            try await Task.sleep(for: .milliseconds(500))
            #expect(receiver.requests.count == 1, "a 400 is not retried")
            let listed = try await command(["list"], config: config, database: database).stdout
            #expect(listed.contains("dead 1"), "\(listed)")

            // A dead letter that does not exist is an error, not "queued 0".
            let missing = try await command(["replay", "99999"], config: config, database: database)
            #expect(missing.status == 1 && missing.stderr.contains("no dead letter 99999"), "\(missing.stdout)\(missing.stderr)")

            refused.withLock { $0 = false }
            let replay = try await command(["replay", "--endpoint", "strict", "--all"], config: config, database: database)
            #expect(replay.stdout.contains("queued 1"), "\(replay.stdout)\(replay.stderr)")
            let requests = try await receiver.wait { $0.count >= 2 }
            #expect(requests[0].id == requests[1].id)
            #expect(try await command(["dead"], config: config, database: database).stdout.contains("no dead letters"))

            // SIGHUP adds an endpoint: it receives what is committed from then on, and the first keeps its work.
            let extended = try configuration([
                Endpoint(name: "strict", url: receiver.url("/strict")), Endpoint(name: "added", url: receiver.url("/added")),
            ])
            try FileManager.default.removeItem(atPath: config)
            try FileManager.default.copyItem(atPath: extended, toPath: config)
            daemon.process.signal(SIGHUP)
            try await waitFor(seconds: 10) { (try? await daemon.statistics().webhooks?["added"]) != nil }
            try insertCourses(database, 1, prefix: "E")
            let both = try await receiver.wait { requests in requests.contains { $0.path == "/added" } && requests.filter { $0.path == "/strict" }.count >= 3 }
            #expect(both.filter { $0.path == "/added" }.count == 1)
        }

        @Test func nothingIsLostWhenTheReceiverIsDownAndTheDaemonIsKilled() async throws {
            let database = try TestDatabase.create()
            let receiver = try await WebhookReceiver()
            let port = receiver.port
            await receiver.stop()
            let config = try configuration([Endpoint(name: "down", url: receiver.url(), extra: ["timeout: 2s"])])
            let first = try await SocketDaemon(database: database, arguments: ["--config", config])
            try insertCourses(database, 10, prefix: "A")
            try database.execute("""
                BEGIN;
                INSERT INTO course (short_code, name) SELECT 'B' || i, 'course' FROM generate_series(1, 10) i;
                COMMIT;
                """)
            // Attempts fail (connection refused), then the daemon dies without a word.
            try await waitFor(seconds: 10) { ((try? await first.statistics().webhooks?["down"]?.failures) ?? 0) > 0 }
            first.process.signal(SIGKILL)
            _ = try await first.process.finish()
            try insertCourses(database, 10, prefix: "C")

            let second = try await SocketDaemon(database: database, socketPath: first.socketPath, arguments: ["--config", config])
            try await receiver.start(port: port)
            let expected = try journalIDs(database)
            #expect(expected.count == 30)
            let requests = try await receiver.wait { Set($0.map(\.id)) == expected }
            #expect(requests.allSatisfy { expected.contains($0.id) })
            #expect(requests.allSatisfy { StandardWebhooksVerifier.verify($0, secret: Self.secret) })
            try await waitFor(seconds: 10) { (try? await second.statistics().webhooks?["down"]?.backlog) == 0 }
        }

        @Test func aFailingReceiversBacklogWaitsInTheJournalAndOnlyFailedAttemptsBecomeRows() async throws {
            let database = try TestDatabase.create()
            let receiver = try await WebhookReceiver()
            let answering = Mutex(false)
            receiver.answer { _, _ in answering.withLock { $0 } ? .status(200) : .status(503) }
            let config = try configuration([Endpoint(name: "failing", url: receiver.url(), extra: ["concurrency: 4"])])
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            try insertCourses(database, 5, prefix: "F")
            try await waitFor(seconds: 10) { (try? await daemon.statistics().webhooks?["failing"]?.failing) == true }
            try database.execute("INSERT INTO course (short_code, name) SELECT 'G' || i, 'course' FROM generate_series(1, 200) i")
            try await waitFor(seconds: 10) { (try? await daemon.statistics().webhooks?["failing"]?.backlog) == 205 }
            // Probes go on meanwhile, one at a time.
            try await Task.sleep(for: .seconds(3))
            let rows = try database.execute("SELECT count(*) FROM pgherald.webhook_delivery WHERE endpoint = 'failing'").rows
            let count = rows.first?[0].flatMap { Int($0) } ?? -1
            #expect(count >= 1 && count <= 5 + 16 + 4, "what failed (and at most the dispatcher's capacity) is a row, not the backlog: \(count) rows")
            answering.withLock { $0 = true }
            let expected = try journalIDs(database)
            #expect(expected.count == 205)
            try await receiver.wait(within: 30) { expected.isSubset(of: Set($0.map(\.id))) }
            // Delivered, not merely tried: nothing is pending any more.
            try await waitFor(seconds: 20) { (try? await daemon.statistics().webhooks?["failing"]?.backlog) == 0 }
        }

        @Test func anAnsweringReceiverGetsEveryEventWithoutARowPerEvent() async throws {
            let database = try TestDatabase.create()
            let receiver = try await WebhookReceiver()
            let config = try configuration([Endpoint(name: "direct", url: receiver.url(), extra: ["concurrency: 4"])])
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            try database.execute("INSERT INTO course (short_code, name) SELECT 'D' || i, 'course' FROM generate_series(1, 200) i")
            try insertCourses(database, 20, prefix: "E")
            let expected = try journalIDs(database)
            let requests = try await receiver.wait { Set($0.map(\.id)) == expected }
            #expect(requests.count == expected.count)
            // Handed over straight from the journal: the delivery table's identity was never drawn from.
            let drawn = try database.execute("""
                SELECT is_called FROM pgherald.webhook_delivery_seq_seq
                """).rows.first?[0]
            #expect(drawn == "f")
            try await waitFor(seconds: 10) { (try? await daemon.statistics().webhooks?["direct"]?.backlog) == 0 }
            let inFlight = try database.execute("SELECT coalesce(sum(cardinality(event_ids)), 0) FROM pgherald.webhook_in_flight").rows.first?[0]
            #expect(inFlight == "0")
        }

        @Test func deliveriesInFlightWhenTheDaemonIsKilledAreSentAgainAtItsNextStart() async throws {
            let database = try TestDatabase.create()
            let receiver = try await WebhookReceiver()
            let answering = Mutex(false)
            receiver.answer { _, _ in answering.withLock { $0 } ? .status(200) : .hang }
            let config = try configuration([Endpoint(name: "killed", url: receiver.url(), extra: ["timeout: 60s", "concurrency: 8"])])
            let first = try await SocketDaemon(database: database, arguments: ["--config", config])
            try insertCourses(database, 5, prefix: "K")
            let expected = try journalIDs(database)
            try await receiver.wait { Set($0.map(\.id)) == expected }
            let held = try database.execute("SELECT cardinality(event_ids) FROM pgherald.webhook_in_flight WHERE endpoint = 'killed'").rows.first?[0]
            #expect(held == "5", "the five requests in flight are on record")
            first.process.signal(SIGKILL)
            _ = try await first.process.finish()

            answering.withLock { $0 = true }
            let started = ContinuousClock.now
            let second = try await SocketDaemon(database: database, socketPath: first.socketPath, arguments: ["--config", config])
            let requests = try await receiver.wait(within: 20) { requests in
                expected.allSatisfy { id in requests.filter { $0.id == id }.count == 2 }
            }
            // The restarted daemon takes its own deliveries back at once, not after the 65 s lease.
            #expect(ContinuousClock.now - started < .seconds(20))
            #expect(requests.count == 10, "each event once more, with its webhook-id: \(requests.map(\.id))")
            try await waitFor(seconds: 10) { (try? await second.statistics().webhooks?["killed"]?.backlog) == 0 }
        }

        @Test func theJournalKeepsThePartAFeedHasNotPassed() async throws {
            let database = try TestDatabase.create()
            try database.execute("INSERT INTO student (first_name, last_name) SELECT 'old', 'row' || g FROM generate_series(1, 50) g")
            let receiver = try await WebhookReceiver()
            let answering = Mutex(false)
            receiver.answer { _, _ in
                while !answering.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(50)) }
                return .status(200)
            }
            let config = try configuration([Endpoint(name: "slow", url: receiver.url(), extra: ["timeout: 30s", "concurrency: 1"])])
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config, "--retention", "1s", "--prune-interval", "1s"])
            try insertCourses(database, 30, prefix: "R")
            let held = Set(try database.execute("SELECT id::text FROM pgherald.journal WHERE event LIKE '%\"R%'").rows.compactMap { $0[0] })
            #expect(held.count == 30)
            // The journal turns to its other part, and the part it left, the 30 in it, stays past the retention.
            try await waitFor(seconds: 20) { try database.execute("SELECT last_value FROM pgherald.journal_current").scalar == "2" }
            try await Task.sleep(for: .seconds(2.5))
            #expect(try await daemon.statistics().journal?.pruned == 0)
            let kept = try database.execute("SELECT count(*) FROM pgherald.journal WHERE id = ANY($1::bigint[])", parameters: ["{" + held.joined(separator: ",") + "}"])
            #expect(kept.rows == [["30"]], "one in flight, the rest waiting in the journal behind the feed")
            // What waits in the journal is pending too: at most 4 handed over (1 sent), the rest behind the feed.
            try await waitFor(seconds: 10) { (try? await daemon.statistics().webhooks?["slow"]?.backlog) == 30 }
            let listed = try await command(["list"], config: config, database: database).stdout
            #expect(listed.contains("pending 30 (") && listed.contains(" of them still in the journal, every table)"), "\(listed)")
            answering.withLock { $0 = true }
            try await receiver.wait(within: 40) { requests in held.isSubset(of: Set(requests.map(\.id))) }
            // Passed, the part goes whole: the 50 from before the feed began and the 30.
            try await waitFor(seconds: 20) { try await daemon.statistics().journal?.pruned ?? 0 >= 80 }
        }

        @Test func twoDaemonsShareTheWorkOnceAndOneKilledLosesNothing() async throws {
            let database = try TestDatabase.create()
            let receiver = try await WebhookReceiver()
            receiver.answer { _, _ in
                try? await Task.sleep(for: .milliseconds(40))
                return .status(200)
            }
            let config = try configuration([Endpoint(name: "shared", url: receiver.url(), extra: ["timeout: 1s", "concurrency: 4"])])
            let first = try await SocketDaemon(database: database, arguments: ["--config", config, "--name", "first"])
            let second = try await SocketDaemon(database: database, arguments: ["--config", config, "--name", "second"])
            try insertCourses(database, 150, prefix: "P")
            var expected = try journalIDs(database)
            var requests = try await receiver.wait { Set($0.map(\.id)).count == 150 }
            try await Task.sleep(for: .milliseconds(500))
            requests = receiver.requests
            #expect(requests.count == 150, "each event once between the two daemons")
            let firstShare = try await first.statistics().webhooks?["shared"]?.successes ?? 0
            let secondShare = try await second.statistics().webhooks?["shared"]?.successes ?? 0
            #expect(firstShare > 0 && secondShare > 0 && firstShare + secondShare == 150, "\(firstShare) + \(secondShare)")

            try insertCourses(database, 150, prefix: "Q")
            expected = try journalIDs(database)
            try await receiver.wait { $0.count >= 190 }
            first.process.signal(SIGKILL)
            let all = expected
            requests = try await receiver.wait(within: 40) { Set($0.map(\.id)) == all }
            let repeated = requests.count - all.count
            // Only what the killed daemon had in flight can come twice, with the same webhook-id.
            #expect(repeated <= 4, "\(repeated) repeats")
        }

        @Test func aHangingEndpointDelaysNeitherAnotherEndpointNorTheSocket() async throws {
            let database = try TestDatabase.create()
            let receiver = try await WebhookReceiver()
            receiver.answer { request, _ in request.path == "/hang" ? .hang : .status(200) }
            let config = try configuration([
                Endpoint(name: "hang", url: receiver.url("/hang"), extra: ["timeout: 5s"]),
                Endpoint(name: "fast", url: receiver.url("/fast")),
            ])
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            let stream = try await RawStream(socketPath: daemon.socketPath, path: "/events?table=course&format=ndjson")
            var lateness: [Duration] = []
            for index in 0..<20 {
                let written = ContinuousClock.now
                try insertCourses(database, 1, prefix: "H\(index)-")
                let fast = try await receiver.wait(within: 10) { $0.filter { $0.path == "/fast" }.count > index }
                lateness.append(fast.filter { $0.path == "/fast" }[index].at - written)
            }
            try await stream.waitForLines(20)
            #expect(receiver.requests.filter { $0.path == "/hang" }.count == 16, "the hanging endpoint holds its 16 connections")
            // Far below the hanging endpoint's 5 s timeout: nothing waited for it.
            #expect(lateness.max()! < .seconds(2), "\(lateness)")
            let hanging = try #require(try await daemon.statistics().webhooks?["hang"])
            #expect(hanging.inFlight == 16)
        }

        @Test func notifyOnlyModeSendsWhatTheDaemonReceives() async throws {
            let database = try TestDatabase.create(durability: .notifyOnly)
            let receiver = try await WebhookReceiver()
            let config = try configuration([Endpoint(name: "live", url: receiver.url(), extra: ["op: INSERT"])])
            let first = try await SocketDaemon(database: database, arguments: ["--config", config])
            try insertCourses(database, 3, prefix: "N")
            try database.execute("UPDATE course SET name = 'renamed'")
            try await receiver.wait { $0.count >= 3 }
            _ = try await first.stop()
            // Without a journal, what is committed while no daemon listens is not sent (documented).
            try insertCourses(database, 2, prefix: "M")
            let second = try await SocketDaemon(database: database, socketPath: first.socketPath, arguments: ["--config", config])
            try insertCourses(database, 1, prefix: "L")
            let requests = try await receiver.wait { $0.contains { $0.text.contains("\"L0\"") } }
            try await Task.sleep(for: .milliseconds(300))
            #expect(receiver.requests.count == 4, "\(requests.map(\.text))")
            #expect(receiver.requests.allSatisfy { $0.text.contains("\"op\":\"INSERT\"") && !$0.text.contains("\"M") })
            _ = second
        }

        @Test func anOrderedEndpointKeepsOrderThroughRetries() async throws {
            let database = try TestDatabase.create()
            let receiver = try await WebhookReceiver()
            receiver.answer { request, attempt in
                request.text.contains("\"O2\"") && attempt < 3 ? .status(503) : .status(200)
            }
            let config = try configuration([Endpoint(name: "ordered", url: receiver.url(), extra: ["ordered: true"])])
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            try insertCourses(database, 6, prefix: "O")
            let expected = try journalIDs(database).sorted { Int($0)! < Int($1)! }
            let requests = try await receiver.wait { $0.count >= 8 }
            let ids = requests.map { Int($0.id)! }
            #expect(ids == ids.sorted(), "nothing overtakes the event being retried: \(ids)")
            var delivered: [String] = []
            for request in requests where delivered.last != request.id { delivered.append(request.id) }
            #expect(delivered == expected)
            let listed = try await command(["list"], config: config, database: database).stdout
            #expect(listed.contains("ordered"))
            _ = daemon
        }
    }
}
