import Foundation
import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// What a new user meets in the first hour: failing starts, missing
    /// sockets, half-installed databases, typos, a second daemon, the demo.
    @Suite
    struct FirstHourTests {
        @Test func thirtyFastFailingStartsEachPrintOnlyTheConnectionError() async throws {
            let socket = SocketDaemon.temporarySocketPath()
            for attempt in 1...30 {
                let result = try await DaemonProcess([
                    "serve", "--db", "host=127.0.0.1 port=1", "--socket", socket, "--log-format", "logfmt",
                ]).finish()
                #expect(result.status != 0)
                let lines = result.stderr.split(separator: "\n")
                let errors = lines.filter { $0.hasPrefix("Error:") || $0.contains("level=error") || $0.contains("level=critical") }
                #expect(errors.count == 1 && errors[0].hasPrefix("Error: cannot connect"), "start \(attempt): \(result.stderr)")
                #expect(!result.stderr.contains("CancellationError") && !result.stderr.contains("Already closed"), "start \(attempt): \(result.stderr)")
                #expect(!FileManager.default.fileExists(atPath: socket), "start \(attempt) left its socket behind")
            }
        }

        @Test(arguments: [["tail"], ["status"], ["demo", "--db", "host=127.0.0.1 port=1"]])
        func clientCommandsSayAtOnceThatTheDaemonIsMissing(command: [String]) async throws {
            let started = ContinuousClock.now
            let result = try await DaemonProcess(command + ["--socket", "/nonexistent/pgherald.sock"]).finish(within: 10)
            #expect(ContinuousClock.now - started < .seconds(2))
            #expect(result.status == 69)
            #expect(result.stderr.contains(
                "cannot reach pgherald at /nonexistent/pgherald.sock: no such file; is the daemon running? (systemctl status pgherald)"
            ), "\(result.stderr)")
        }

        /// The client commands find the socket as the daemon does: --socket, then socket.path from
        /// the environment or the configuration file (--config, else /etc/pgherald/pgherald.yaml).
        @Test func clientCommandsFindTheSocketTheDaemonWasConfiguredWith() async throws {
            let database = try TestDatabase.create()
            let socket = SocketDaemon.temporarySocketPath()
            let config = (socket as NSString).deletingLastPathComponent + "/pgherald.yaml"
            try "socket:\n  path: \(socket)\nevent_log:\n  path: \(socket).events\n".write(toFile: config, atomically: true, encoding: .utf8)
            let daemon = try await SocketDaemon(database: database, socketPath: socket, arguments: ["--config", config])
            try database.execute("INSERT INTO course (short_code, name) VALUES ('CFG', 'Found')")
            try await Task.sleep(for: .seconds(1.5))

            let status = try await DaemonProcess(["status", "--config", config]).finish(within: 10)
            #expect(status.status == 0, "\(status.stderr)")
            #expect(status.stdout.contains("listener:    listening"), "\(status.stdout)")
            // Every output with its health, a durable one with its backlog.
            #expect(status.stdout.contains("outputs:"), "\(status.stdout)")
            #expect(status.stdout.contains("event_log  durable, ok, 1 delivered, backlog 0"), "\(status.stdout)")
            #expect(status.stdout.contains("socket"), "\(status.stdout)")

            let fromEnvironment = try await DaemonProcess(["status"], environment: ["PGHERALD_SOCKET_PATH": socket]).finish(within: 10)
            #expect(fromEnvironment.status == 0, "\(fromEnvironment.stderr)")

            let tail = try DaemonProcess(["tail", "--config", config, "--format", "json"])
            try await daemon.waitForSubscribers(1, kind: "sse")
            try database.execute("INSERT INTO course (short_code, name) VALUES ('CFG2', 'Tailed')")
            _ = try await tail.readLine { $0.contains("CFG2") }
            tail.signal(SIGTERM)

            let missing = try await DaemonProcess(["status", "--config", config + ".missing"]).finish(within: 10)
            #expect(missing.status == 78 && missing.stderr.contains("no such file"), "\(missing.stderr)")
            _ = try await daemon.stop()
        }

        @Test func tailWithRetryWaitsForTheDaemonAndSaysSo() async throws {
            let database = try TestDatabase.create()
            let socket = SocketDaemon.temporarySocketPath()
            let tail = try DaemonProcess(["tail", "--socket", socket, "--retry", "--format", "json"])
            try await Task.sleep(for: .milliseconds(500))
            #expect(tail.process.isRunning, "tail --retry gave up")
            let daemon = try await SocketDaemon(database: database, socketPath: socket)
            try await daemon.waitForSubscribers(1, kind: "sse")
            try database.execute("INSERT INTO course (short_code, name) VALUES ('RTY', 'Retry')")
            _ = try await tail.readLine { $0.contains("RTY") }
            _ = try await daemon.stop()
            tail.signal(SIGTERM)
            let result = try await tail.finish()
            let lines = result.stderr.split(separator: "\n")
            // The problem once, not once per attempt; then the connection; then the problem again after the stop.
            #expect(lines.count >= 2 && lines[0].hasPrefix("pgherald tail: cannot reach pgherald at \(socket): no such file"), "\(result.stderr)")
            #expect(lines.count >= 2 && lines[1] == "pgherald tail: connected to \(socket)", "\(result.stderr)")
            // Only tail's own lines: no log line of the client library in between.
            #expect(lines.allSatisfy { $0.hasPrefix("pgherald tail: ") }, "\(result.stderr)")
        }

        @Test func aDatabaseWithoutThePublisherSaysWhichInstallToRun() async throws {
            let database = try TestDatabase.create(install: false)
            let daemon = try DaemonProcess(["serve", "--db", database.connInfo, "--no-socket", "--log-format", "logfmt"])
            try await Task.sleep(for: .seconds(1))
            daemon.signal(SIGTERM)
            let result = try await daemon.finish()
            #expect(result.status == 0, "\(result.stderr)")
            #expect(!result.stderr.contains("does not exist"), "\(result.stderr)")
            #expect(result.stderr.contains("run pgherald install --db '"), "\(result.stderr)")
            #expect(result.stderr.contains("dbname=\(database.name)"))
        }

        @Test func badSocketPathsAreNamedWithWhatToChange() async throws {
            let database = try TestDatabase.create()
            let missing = try await DaemonProcess(["serve", "--db", database.connInfo, "--socket", "/nonexistent/dir/p.sock"]).finish()
            #expect(missing.status != 0)
            #expect(missing.stderr.contains("Error: cannot create socket /nonexistent/dir/p.sock: directory /nonexistent/dir does not exist"), "\(missing.stderr)")

            let long = "/tmp/" + String(repeating: "x", count: 110) + ".sock"
            // A name of its own: the first one's session may still hold the name for a moment after it exited.
            let tooLong = try await DaemonProcess(["serve", "--db", database.connInfo, "--name", "second", "--socket", long]).finish()
            #expect(tooLong.stderr.contains("Error: socket path \(long) is 120 bytes, longer than the 107 a Unix socket allows"), "\(tooLong.stderr)")
        }

        @Test func anUnknownConnectionOptionIsNamedButValuesStayMasked() async throws {
            let result = try await DaemonProcess(["serve", "--db", "hots=localhost password=s3cr3t", "--no-socket"]).finish()
            #expect(result.stderr.contains(#"invalid connection option "hots""#), "\(result.stderr)")
            #expect(!result.stderr.contains("s3cr3t"))
        }

        @Test func aPasswordOnTheCommandLineIsWarnedAbout() async throws {
            let result = try await DaemonProcess(["serve", "--db", "host=127.0.0.1 port=1 password=hunter2", "--no-socket", "--log-format", "logfmt"]).finish()
            #expect(result.stderr.contains("--db contains a password, which every local user can read with ps"), "\(result.stderr)")
            #expect(!result.stderr.contains("hunter2"))
        }

        @Test func helpListsOnlyLogCategoriesThatExist() async throws {
            let help = try await DaemonProcess(["serve", "--help"]).finish()
            // Help wraps its lines; compare the words.
            let words = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            #expect(words.contains("Categories: database, broker, socket, webhook, realtime, eventlog, nats, cluster, queries, lifecycle, config."), "\(help.stdout)")
        }

        @Test func filterValuesAreCheckedAgainstColumnTypesAndQuotedNamesWork() async throws {
            let database = try TestDatabase.create()
            try database.execute(#"CREATE TABLE "Weird Table" (id int PRIMARY KEY, "Odd.Col" text); SELECT pgherald.attach_all()"#)
            let daemon = try await SocketDaemon(database: database)

            let badValue = try await daemon.get("/events?table=course&where=id.gt.abc")
            #expect(badValue.status == 400)
            #expect(badValue.body.contains(#""error":"invalid_value""#), "\(badValue.body)")
            #expect(badValue.body.contains("column id is int4: 'abc' is not a whole number"), "\(badValue.body)")
            let badList = try await daemon.get("/events?where=id.in.(1,x)")
            #expect(badList.status == 400, "\(badList.body)")
            #expect(try await daemon.get("/events?table=course&where=id.gt.5&format=ndjson&since=x").status == 400, "since still checked")

            let unknown = try await daemon.get("/events?sincee=1")
            #expect(unknown.body.contains("known: table, op, where, topic, format, since"), "\(unknown.body)")

            let quoted = try await RawStream(
                socketPath: daemon.socketPath, path: "/events?format=ndjson&table=%22Weird%20Table%22&where=%22Odd.Col%22.eq.yes"
            )
            try database.execute(#"INSERT INTO "Weird Table" VALUES (1, 'no'), (2, 'yes')"#)
            try await quoted.waitForLines(1)
            try await Task.sleep(for: .milliseconds(200))
            let events = quoted.lines.compactMap { try? Event(payload: String($0)) }
            #expect(events.map(\.table) == [TableName(name: "Weird Table")])
            #expect(events.first?.row?["id"] == .number(JSONNumber(2)))
        }

        @Test func aSecondDaemonUnderTheSameNameIsRefusedWithTheFirstOnesPid() async throws {
            let database = try TestDatabase.create()
            let first = try await SocketDaemon(database: database)
            let second = try await DaemonProcess(["serve", "--db", database.connInfo, "--socket", SocketDaemon.temporarySocketPath()]).finish()
            #expect(second.status != 0)
            let pid = first.process.process.processIdentifier
            #expect(second.stderr.contains("another pgherald serve runs under --name default on this database (host \(ProcessInfo.processInfo.hostName), pid \(pid),"), "\(second.stderr)")
            // Another name shares the database.
            _ = try await SocketDaemon(database: database, arguments: ["--name", "second"])
            // Once the first stops, the name is free again.
            _ = try await first.stop()
            _ = try await SocketDaemon(database: database)
        }

        @Test func statusCountsJournalRowsWrittenSinceStart() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database)
            try database.execute("INSERT INTO course (short_code, name) SELECT 'J' || n, 'j' FROM generate_series(1, 7) AS n")
            try await Task.sleep(for: .seconds(2.5))
            let status = try await DaemonProcess(["status", "--socket", daemon.socketPath]).finish()
            #expect(status.stdout.contains("journal:     about 7 events"), "\(status.stdout)")
            #expect(!status.stdout.contains("empty"), "\(status.stdout)")
        }

        /// Every command scripts/demo prints for a second terminal works as
        /// printed, from root's shell as here: psql, tail, demo and the
        /// EnrolmentsByCourse example on its live query.
        @Test func everyCommandTheDemoPrintsWorksAsPrinted() async throws {
            let demo = try DaemonProcess(
                ["--serve"],
                environment: ["PGHERALD_BINARY": DaemonProcess.executable.path],
                executable: TestDatabase.repositoryRoot.appending(path: "scripts/demo")
            )
            let printed = Recorded<[String]>([])
            var serving = false
            _ = try await demo.readLine(within: 90) { line in
                if line.hasPrefix("==> serving") { printed.withLock { $0.append("") } }
                let collecting = printed.withLock { !$0.isEmpty }
                if collecting, line.hasPrefix("    "), !line.contains("Ctrl-C") {
                    printed.withLock { $0.append(line.trimmingCharacters(in: .whitespaces)) }
                }
                return line.contains("Ctrl-C here stops everything")
            }
            serving = true
            let commands = printed.withLock { $0 }.filter { !$0.isEmpty }
            try #require(commands.count == 4, "\(commands)")
            let bash = URL(fileURLWithPath: "/bin/bash")

            let psql = try DaemonProcess(["-c", commands[0]], executable: bash, withInput: true)
            psql.write(line: "INSERT INTO enrols_in (student_id, course_id) VALUES (1, 3) ON CONFLICT DO NOTHING;")
            psql.write(line: "SELECT 'psql works' AS demo;")
            psql.stdin?.fileHandleForWriting.closeFile()
            let psqlResult = try await psql.finish(within: 20)
            #expect(psqlResult.status == 0 && psqlResult.stdout.contains("psql works"), "\(commands[0]): \(psqlResult.stderr)")

            let tail = try DaemonProcess(["-c", commands[1]], executable: bash)
            let view = try DaemonProcess(["-c", commands[2]], executable: bash)
            let example = try DaemonProcess(["-c", commands[3]], executable: bash)
            _ = try await view.readLine(within: 20) { $0.contains("Enrolments by course") }
            _ = try await example.readLine(within: 20) { $0.contains("Enrolments by course (result 1)") }
            try await Task.sleep(for: .milliseconds(500))
            let write = try DaemonProcess(["-c", commands[0]], executable: bash, withInput: true)
            write.write(line: "INSERT INTO course (short_code, name) VALUES ('SECOND', 'Second terminal');")
            write.stdin?.fileHandleForWriting.closeFile()
            #expect(try await write.finish(within: 20).status == 0)
            _ = try await tail.readLine(within: 20) { $0.contains("SECOND") || $0.contains("Second terminal") }
            _ = try await example.readLine(within: 20) { $0.contains("Second terminal") }
            for process in [tail, view, example] { process.signal(SIGTERM) }
            // As Ctrl-C would: the script waits for its daemon, then removes the cluster.
            let script = demo.process.processIdentifier
            let children = (try? String(contentsOfFile: "/proc/\(script)/task/\(script)/children", encoding: .utf8)) ?? ""
            for child in children.split(separator: " ").compactMap({ Int32($0) }) { kill(child, SIGTERM) }
            let result = try await demo.finish(within: 30)
            #expect(serving && result.status == 0, "\(result.stderr)")
        }

        @Test func theDemoReachesItsSampleWritesWithinFiveSecondsOfServing() async throws {
            let demo = try DaemonProcess(
                ["--once"],
                environment: ["PGHERALD_BINARY": DaemonProcess.executable.path],
                executable: TestDatabase.repositoryRoot.appending(path: "scripts/demo")
            )
            _ = try await demo.readLine(within: 60) { $0.hasPrefix("==> pgherald serve") }
            let serving = ContinuousClock.now
            _ = try await demo.readLine(within: 20) { $0.contains("INSERT public.course") }
            #expect(ContinuousClock.now - serving < .seconds(5))
            let result = try await demo.finish(within: 30)
            #expect(result.status == 0, "\(result.stderr)")
        }
    }
}
