import Foundation
import Herald
import HeraldClient
import HeraldEventLog
import HeraldPostgres
import Synchronization
import Testing

extension IntegrationTests {
    /// serve as systemd runs it: readiness, status, the watchdog, SIGHUP reloads, the event log.
    @Suite
    struct ServiceTests {
        func insertCourses(_ database: TestDatabase, _ codes: some Sequence<String>) throws {
            for code in codes {
                try database.execute("INSERT INTO course (short_code, name) VALUES ($1, 'course')", parameters: [code])
            }
        }

        func events(in path: String) -> [Event] {
            ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { try? Event(payload: String($0)) }
        }

        func temporaryDirectory() -> String {
            let path = FileManager.default.temporaryDirectory.appending(path: "pgherald-service-\(UUID().uuidString.prefix(8))").path
            try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            return path
        }

        @Test func readyComesOnlyOnceCatchUpIsDeliveredAndReloadAndStopAreAnnounced() async throws {
            let database = try TestDatabase.create()
            let first = try await SocketDaemon(database: database)
            _ = try await first.stop()
            // Written while no daemon runs: the next start must deliver it before saying it is ready.
            try insertCourses(database, ["GAP"])

            let notify = try NotifyReceiver()
            let daemon = try await SocketDaemon(database: database, socketPath: first.socketPath, environment: ["NOTIFY_SOCKET": notify.path])
            let ready = try await notify.waitFor("READY=1")
            #expect(ready.contains("STATUS=listening; 1 changes"), "\(ready)")

            daemon.process.signal(SIGHUP)
            let reloading = try await notify.waitFor("RELOADING=1")
            #expect(reloading.contains("MONOTONIC_USEC="))
            try await waitFor { notify.times(of: "READY=1").count == 2 } failure: { "no READY=1 after the reload: \(notify.messages)" }

            _ = try await daemon.stop()
            try await notify.waitFor("STOPPING=1")
            let order = notify.messages.compactMap { message in ["READY=1", "RELOADING=1", "STOPPING=1"].first { message.contains($0) } }
            #expect(order == ["READY=1", "RELOADING=1", "READY=1", "STOPPING=1"])
        }

        /// READY=1 and `/healthz` wait for the outputs whose place in the
        /// journal starts when they take it: a webhook endpoint's feed and the
        /// durable event log's cursor. A write made once the daemon says it is
        /// ready reaches both. Here a lock holds both places back.
        @Test func readinessWaitsForTheWebhookFeedsAndTheEventLogsCursor() async throws {
            let database = try TestDatabase.create()
            let receiver = try await WebhookReceiver()
            let directory = temporaryDirectory()
            let secretFile = "\(directory)/secret"
            try ("whsec_" + Data(repeating: 7, count: 32).base64EncodedString() + "\n").write(toFile: secretFile, atomically: true, encoding: .utf8)
            let config = "\(directory)/pgherald.yaml"
            try "webhooks:\n  hook:\n    url: \(receiver.url())\n    secret_file: \(secretFile)\n".write(toFile: config, atomically: true, encoding: .utf8)
            let log = "\(directory)/events.jsonl"
            let blocker = try database.connect()
            try blocker.execute("BEGIN; LOCK TABLE pgherald.webhook_feed, pgherald.output_cursor IN EXCLUSIVE MODE")

            let notify = try NotifyReceiver()
            let socketPath = SocketDaemon.temporarySocketPath()
            let daemon = try DaemonProcess(
                ["serve", "--db", database.connInfo, "--socket", socketPath, "--config", config, "--event-log", log, "--log-format", "json"],
                environment: ["NOTIFY_SOCKET": notify.path]
            )
            var health: (status: UInt, body: String)?
            try await waitFor {
                health = try? await SocketDaemon.get("/healthz", socketPath: socketPath)
                return health?.body.contains("outputs starting") == true
            } failure: { "the daemon did not say its outputs were starting: \(String(describing: health))" }
            #expect(health?.status == 503)
            #expect(health?.body.contains("webhooks") == true && health?.body.contains("event_log") == true, "\(String(describing: health))")
            let status = try await DaemonProcess(["status", "--socket", socketPath]).finish()
            #expect(status.stdout.contains("listener:    listening (outputs starting: "), "\(status.stdout)")
            try await Task.sleep(for: .milliseconds(500))
            #expect(notify.times(of: "READY=1").isEmpty, "READY=1 before the outputs had their places")

            try blocker.execute("COMMIT")
            try await notify.waitFor("READY=1")
            #expect(try await SocketDaemon.get("/healthz", socketPath: socketPath).status == 200)
            try insertCourses(database, ["READY"])
            _ = try await receiver.wait { $0.count == 1 }
            try await waitFor { events(in: log).count == 1 } failure: { "the event log has \(events(in: log).count) events" }
            daemon.signal(SIGTERM)
            let stopped = try await daemon.finish()
            #expect(stopped.status == 0, "\(stopped.stderr)")
        }

        /// Every wait of the listener is bounded by the connect timeout, so a
        /// lock that holds its checkpoint no longer wedges it: the query times
        /// out, the listener reconnects, and the watchdog keeps being fed.
        @Test func theWatchdogPingsUnderLoadAndALockedCheckpointMakesTheListenerReconnectNotWedge() async throws {
            let database = try TestDatabase.create()
            let notify = try NotifyReceiver()
            let daemon = try await SocketDaemon(
                database: database, arguments: ["--connect-timeout", "1s"],
                environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "1000000"]
            )
            try await notify.waitFor("READY=1")
            // Normal load: pings every half second.
            let loadStart = ContinuousClock.now
            for round in 0..<30 {
                try insertCourses(database, ["L\(round)"])
                try await Task.sleep(for: .milliseconds(100))
            }
            let duringLoad = notify.times(of: "WATCHDOG=1").filter { $0 > loadStart }
            #expect(duringLoad.count >= 4, "\(duringLoad.count) pings in 3 s of load")

            // The listener's next checkpoint waits for a lock that is held for 8 s.
            let locker = try database.connect()
            try locker.execute("BEGIN; LOCK TABLE pgherald.checkpoint IN ACCESS EXCLUSIVE MODE")
            try insertCourses(database, ["LOCKED"])
            try await Task.sleep(for: .seconds(6))
            let watchFrom = ContinuousClock.now
            try await Task.sleep(for: .seconds(2))
            let whileLocked = notify.times(of: "WATCHDOG=1").filter { $0 > watchFrom }
            #expect(whileLocked.count >= 2, "\(whileLocked.count) pings while the checkpoint was locked: the listener wedged")
            let metrics = try await daemon.get("/metrics").body.split(separator: "\n")
            #expect(metrics.contains { $0.hasPrefix("pgherald_listener_reconnects_total ") && !$0.hasSuffix(" 0") }, "it reconnected")

            try locker.execute("ROLLBACK")
            try insertCourses(database, ["AFTER"])
            try await waitFor(seconds: 10) {
                try await daemon.statistics().changeCount >= 32
            } failure: { "events did not flow again" }
            _ = try await daemon.stop()
        }

        @Test func sighupChangesLogLevelsAndKeepsSubscribersAndTheDatabaseConnection() async throws {
            let database = try TestDatabase.create()
            let directory = temporaryDirectory()
            let config = "\(directory)/pgherald.yaml"
            try "log:\n  level: info\n".write(toFile: config, atomically: true, encoding: .utf8)
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            let backend = try database.execute("SELECT pid FROM pg_stat_activity WHERE application_name = 'pgherald' AND datname = current_database()").rows

            let stream = try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson&table=course")
            for round in 0..<10 {
                try insertCourses(database, ["H\(round)"])
                daemon.process.signal(SIGHUP)
                try await Task.sleep(for: .milliseconds(150))
            }
            try await stream.waitForLines(10)
            try await Task.sleep(for: .milliseconds(200))
            let codes = stream.lines.compactMap { try? Event(payload: String($0)) }.compactMap { $0.row?["short_code"]?.stringValue }
            #expect(codes == (0..<10).map { "H\($0)" })
            #expect(!stream.isFinished)
            let after = try database.execute("SELECT pid FROM pg_stat_activity WHERE application_name = 'pgherald' AND datname = current_database()").rows
            #expect(after == backend, "the listener's connection was replaced")

            // A debug line appears only once the reload asked for debug.
            try "log:\n  level: info,socket=debug\n".write(toFile: config, atomically: true, encoding: .utf8)
            daemon.process.signal(SIGHUP)
            try await Task.sleep(for: .milliseconds(300))
            _ = try await daemon.get("/events?table=nope")
            // A bad file is refused with one line naming the key; the running configuration stays.
            try "socket:\n  max_subscribers: many\n".write(toFile: config, atomically: true, encoding: .utf8)
            daemon.process.signal(SIGHUP)
            try await Task.sleep(for: .milliseconds(300))
            let result = try await daemon.stop()
            let lines = result.stderr.split(separator: "\n")
            let debugLines = lines.filter { $0.contains(#""level":"debug""#) && $0.contains(#""category":"socket""#) }
            #expect(debugLines.count >= 1, "no socket debug line after the reload")
            let firstDebug = try #require(lines.firstIndex { $0.contains(#""level":"debug""#) })
            let firstReload = try #require(lines.firstIndex { $0.contains("reloaded the configuration") })
            #expect(firstDebug > firstReload)
            let rejected = lines.filter { $0.contains("the new configuration was rejected") }
            #expect(rejected.count == 1 && rejected[0].contains("socket.max_subscribers"), "\(rejected)")
        }

        @Test func theEventLogLosesNothingAcrossLogrotateAndItsOwnRotation() async throws {
            let database = try TestDatabase.create()
            let directory = temporaryDirectory()
            let path = "\(directory)/events.jsonl"
            let config = "\(directory)/pgherald.yaml"
            try "event_log:\n  path: \(path)\n  max_size: 8K\n  keep: 1000\n".write(toFile: config, atomically: true, encoding: .utf8)
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])

            let writer = Task.detached {
                for round in 0..<300 {
                    try insertCourses(database, ["R\(round)"])
                    try await Task.sleep(for: .milliseconds(5))
                }
            }
            // logrotate's way, twice, during the writes: move the file away, then SIGHUP.
            for moved in 1...2 {
                try await Task.sleep(for: .milliseconds(400))
                try FileManager.default.moveItem(atPath: path, toPath: "\(path).logrotate-\(moved)")
                daemon.process.signal(SIGHUP)
            }
            try await writer.value
            try await waitFor { try await daemon.statistics().changeCount == 300 }
            _ = try await daemon.stop()

            let files = ["\(path).logrotate-1", "\(path).logrotate-2"] + EventLogReader.rotatedGenerations(of: path) + [path]
            let perFile = files.map { events(in: $0).map(\.count) }
            #expect(perFile.joined().sorted() == Array(1...300), "every event exactly once")
            for (file, counts) in zip(files, perFile) {
                #expect(counts == counts.sorted(), "\(file) is not in delivery order")
            }
            #expect(files.count > 4, "the 8K limit rotated too: \(files)")
        }

        /// By default the event log reads the journal behind the listener, and
        /// each line carries the count the broker gave its event, with
        /// writers committing concurrently.
        @Test func theEventLogIsDurableByDefaultWithTheBrokersCounts() async throws {
            let database = try TestDatabase.create()
            let path = "\(temporaryDirectory())/events.jsonl"
            let daemon = try await SocketDaemon(database: database, arguments: ["--event-log", path])
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<4 {
                    group.addTask { try insertCourses(database, (0..<20).map { "W\(writer)-\($0)" }) }
                }
                try await group.waitForAll()
            }
            try await waitFor { events(in: path).count == 80 }
            let statistics = try await daemon.statistics()
            #expect(statistics.outputs?["event_log"]?.feed == .durable)
            #expect(statistics.outputs?["event_log"]?.delivered == 80)
            let logged = events(in: path)
            #expect(Set(logged.map(\.count)) == Set(1...80), "every line has the count the broker gave it")
            #expect(Set(logged.map(\.id)).count == 80)
            // A graceful stop ends the durable log's wait for the journal at once.
            let stopping = ContinuousClock.now
            let stopped = try await daemon.stop()
            #expect(stopped.status == 0, "\(stopped.stderr)")
            #expect(ContinuousClock.now - stopping < .seconds(5))
        }

        /// On an install without a journal the default event log is live and
        /// says so; a durable feed asked for in so many words stops serve.
        @Test func onANotifyOnlyInstallTheDefaultEventLogIsLive() async throws {
            let database = try TestDatabase.create(durability: .notifyOnly)
            let path = "\(temporaryDirectory())/events.jsonl"
            let daemon = try await SocketDaemon(database: database, arguments: ["--event-log", path])
            try await waitFor { try await daemon.statistics().outputs?["event_log"]?.feed == .live }
            try insertCourses(database, ["LIVE"])
            try await waitFor { events(in: path).map(\.count) == [1] }
            let stopped = try await daemon.stop()
            #expect(stopped.stderr.contains("the event log is live"), "\(stopped.stderr)")

            let refused = try await DaemonProcess(
                ["serve", "--db", database.connInfo, "--no-socket", "--event-log", path],
                environment: ["PGHERALD_EVENT_LOG_FEED": "durable"]
            ).finish()
            #expect(refused.status != 0)
            #expect(refused.stderr.contains("installed notify-only and keeps no journal"), "\(refused.stderr)")
        }

        /// The event log on a full filesystem (a small tmpfs, mounted for the
        /// test): writing fails, the log says so in `/stats`, and once there is
        /// room every event arrives, once and in order, from the journal.
        @Test(.enabled(if: getuid() == 0, "mounting a tmpfs needs root"))
        func theDurableEventLogLosesNothingToAFullDisk() async throws {
            let database = try TestDatabase.create()
            let directory = temporaryDirectory()
            #expect(system("mount -t tmpfs -o size=256k pgherald-full '\(directory)'") == 0)
            defer { _ = system("umount -l '\(directory)'") }
            // Leaves about 8K free: room for a few events only.
            let filler = "\(directory)/filler"
            FileManager.default.createFile(atPath: filler, contents: Data(count: 248 * 1024))
            let path = "\(directory)/events.jsonl"
            let daemon = try await SocketDaemon(database: database, arguments: ["--event-log", path])
            let codes = (0..<200).map { "F\($0)" }
            try insertCourses(database, codes)
            try await waitFor(seconds: 20) {
                try await daemon.statistics().outputs?["event_log"]?.health == "degraded"
            } failure: { "the event log never reported the full disk" }
            let stalled = try await daemon.statistics().outputs?["event_log"]
            #expect(stalled?.feed == .durable)
            #expect(stalled?.reason?.contains("No space left on device") == true, "\(String(describing: stalled))")
            #expect(events(in: path).count < codes.count)

            try FileManager.default.removeItem(atPath: filler)
            try await waitFor(seconds: 20) { events(in: path).count >= codes.count } failure: { "only \(events(in: path).count) events after the disk had room" }
            try await waitFor(seconds: 5) { try await daemon.statistics().outputs?["event_log"]?.health == "ok" }
            _ = try await daemon.stop()
            let logged = events(in: path).compactMap { $0.row?["short_code"]?.stringValue }
            #expect(logged == codes, "every event once, in order")
        }

        @Test func tailFollowsTheEventLogAcrossThreeRotations() async throws {
            let database = try TestDatabase.create()
            let directory = temporaryDirectory()
            let path = "\(directory)/events.jsonl"
            let config = "\(directory)/pgherald.yaml"
            // 4K per file: about 16 events each, so 60 events rotate at least three times.
            try "event_log:\n  path: \(path)\n  max_size: 4K\n  keep: 100\n".write(toFile: config, atomically: true, encoding: .utf8)
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            let tail = try DaemonProcess(["tail", "--log", path, "-f", "--format", "json", "--table", "course"])
            try await Task.sleep(for: .milliseconds(300))
            for batch in 0..<4 {
                try insertCourses(database, (0..<25).map { "T\(batch * 25 + $0)" })
                try await Task.sleep(for: .milliseconds(150))
            }
            let printed = Mutex<[String]>([])
            _ = try await tail.readLine(within: 20) { line in
                let code = (try? Event(payload: line))?.row?["short_code"]?.stringValue
                printed.withLock { $0 += code.map { [$0] } ?? [] }
                return code == "T99"
            }
            tail.signal(SIGTERM)
            #expect(printed.withLock { $0 } == (0..<100).map { "T\($0)" })
            #expect(EventLogReader.rotatedGenerations(of: path).count >= 3)
            _ = try await daemon.stop()
        }

        @Test func aBadConfigurationStopsServeWithStatus78() async throws {
            let directory = temporaryDirectory()
            let config = "\(directory)/pgherald.yaml"
            try "socket:\n  write_rate: -5\n".write(toFile: config, atomically: true, encoding: .utf8)
            let serve = try await DaemonProcess(["serve", "--config", config]).finish()
            #expect(serve.status == 78)
            #expect(serve.stderr.contains("Error: configuration: socket.write_rate (\(config) line 2): -5 is out of range"), "\(serve.stderr)")
            let check = try await DaemonProcess(["check-config", config]).finish()
            #expect(check.status == 78)
            let good = try await DaemonProcess(["check-config", "/dev/null"], environment: ["PGHERALD_NAME": "from-env"]).finish()
            #expect(good.status == 0, "\(good.stderr)")
            #expect(good.stdout.contains("name: from-env"))
            #expect(good.stdout.contains("# PGHERALD_NAME"))
        }

        /// As the hardened unit once did by filtering chown: the daemon cannot give its socket to
        /// `socket.group`. It must not serve that socket, and must end as an error, not a crash.
        @Test(.enabled(if: getuid() == 0, "runs the daemon as nobody, which needs root"))
        func aSocketThatCannotBeGivenToItsGroupEndsServeWithAnErrorAndNoSocket() async throws {
            let database = try TestDatabase.create()
            let directory = temporaryDirectory()
            chmod(directory, 0o777)
            let socket = "\(directory)/pgherald.sock"
            let daemon = try DaemonProcess(
                ["--reuid=nobody", "--regid=nogroup", "--clear-groups", SharedWithOtherUsers.path(of: DaemonProcess.executable),
                 "serve", "--db", database.connInfo, "--socket", socket, "--log-format", "logfmt"],
                environment: ["PGHERALD_SOCKET_GROUP": "root"], executable: URL(fileURLWithPath: "/usr/bin/setpriv")
            )
            let result = try await daemon.finish(within: 30)
            #expect(result.status == 1, "\(result.stderr)")
            #expect(result.stderr.contains("cannot secure the socket; exiting"), "\(result.stderr)")
            #expect(result.stderr.contains("cannot give \(socket) to group root"), "\(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: socket))
        }

        @Test func aFileThatNamesNoDatabaseKeepsServeDownWithStatus78AndCheckConfigSaysWhy() async throws {
            let directory = temporaryDirectory()
            let config = "\(directory)/pgherald.yaml"
            try "name: not-set-up\n".write(toFile: config, atomically: true, encoding: .utf8)
            let unset: Set = ["PGHOST", "PGHOSTADDR", "PGPORT", "PGUSER", "PGDATABASE", "PGSERVICE", "PGSERVICEFILE", "PGHERALD_DATABASE"]
            let serve = try await DaemonProcess(["serve", "--config", config], removing: unset).finish()
            #expect(serve.status == 78)
            #expect(serve.stderr.contains("\(config) names no database"), "\(serve.stderr)")
            #expect(serve.stderr.contains("serve does not start until it does"), "\(serve.stderr)")
            let check = try await DaemonProcess(["check-config", config], removing: unset).finish()
            #expect(check.status == 0, "\(check.stderr)")
            #expect(check.stderr.contains("serve refuses to start (exit 78) until it does"), "\(check.stderr)")

            // Named by libpq's own variables instead, the same file serves.
            let database = try TestDatabase.create()
            let socket = "\(directory)/pgherald.sock"
            try "name: named-by-libpq\nsocket:\n  path: \(socket)\n".write(toFile: config, atomically: true, encoding: .utf8)
            var libpq: [String: String] = [:]
            for pair in database.connInfo.split(separator: " ") {
                let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                if let variable = ["host": "PGHOST", "port": "PGPORT", "user": "PGUSER", "dbname": "PGDATABASE"][parts[0]] { libpq[variable] = parts[1] }
            }
            let named = try DaemonProcess(["serve", "--config", config], environment: libpq, removing: unset.subtracting(libpq.keys))
            try await waitFor(seconds: 20) {
                (try? await HeraldClient(socketPath: socket).statistics()) != nil
            } failure: { "serve with PGHOST and PGDATABASE did not come up" }
            named.signal(SIGTERM)
            #expect(try await named.finish().status == 0)
        }
    }
}
