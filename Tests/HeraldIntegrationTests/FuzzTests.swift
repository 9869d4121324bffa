import Foundation
import Herald
import Testing

extension IntegrationTests {
    /// `scripts/fuzz-api` against a daemon that serves everything a client
    /// can reach: every route and every realtime message, over the Unix
    /// socket and the TCP listener, with no token, a realtime key, JWTs with
    /// and without row-level security (and forged claims), the console key,
    /// and the socket's peer; while a writer changes rows. A trap or a hang
    /// fails it.
    @Suite
    struct FuzzTests {
        /// How long the fuzzer runs: bounded, so that the suite stays well within CI's time.
        static let seconds = 45

        /// Found by the fuzzer: a request with an `Upgrade` other than the
        /// realtime WebSocket's got no answer at all, on every route and
        /// listener; `curl --http2` over plain HTTP sends one with every request.
        @Test func aRequestOfferingAnotherProtocolIsAnsweredOverHTTP1() async throws {
            let database = try TestDatabase.create()
            let port = freeLoopbackPort()
            let config = try RowSecurityTests.configuration { _ in
                "http:\n  listen: 127.0.0.1:\(port)\nconsole:\n  key: upgrade-console-key-0123456789abcdef\n"
            }
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            func curl(_ arguments: [String]) async throws -> String {
                let result = try await DaemonProcess(["-s", "--max-time", "10", "-w", "\n%{http_code}"] + arguments, executable: URL(fileURLWithPath: "/usr/bin/curl"))
                    .finish(within: 20)
                return String(result.stdout.split(separator: "\n").last ?? "")
            }
            for upgrade in ["h2c", "websocket", "foo"] {
                #expect(try await curl(["--unix-socket", daemon.socketPath, "-H", "Upgrade: \(upgrade)", "-H", "Connection: Upgrade", "http://localhost/healthz"]) == "200", "\(upgrade)")
            }
            #expect(try await curl(["--http2", "-H", "Authorization: Bearer upgrade-console-key-0123456789abcdef", "http://127.0.0.1:\(port)/healthz"]) == "200")
            _ = try await daemon.stop()
        }

        @Test func noInputFromAnyIdentityCrashesOrHangsTheDaemon() async throws {
            let database = try TestDatabase.create()
            let role = try AttackTests.prepare(database)
            defer { AttackTests.drop(role, in: database) }
            let port = freeLoopbackPort()
            let config = try RowSecurityTests.configuration { secretFile in
                """
                http:
                  listen: 127.0.0.1:\(port)
                console:
                  key: fuzz-console-key-0123456789abcdef
                realtime:
                  keys:
                    app:
                      key: fuzz-app-key-0123456789abcdef
                      tables: [course, todo]
                      topics: [room-*]
                      queries: [students_of, enrolments_by_course]
                  jwt:
                    secret_file: \(secretFile)
                    roles:
                      anon:
                        schemas: [public]
                        queries: ["*"]
                      \(role):
                        rls: true
                        topics: [room-*]
                queries:
                  enrolments_by_course:
                    sql: select c.id as course_id, c.name, count(e.*) as enrolled from course c left join enrols_in e on e.course_id = c.id group by c.id
                    key: [course_id]
                  students_of:
                    sql: select s.id, s.first_name from student s join enrols_in e on e.student_id = s.id where e.course_id = $1::int
                    key: [id]
                    params: [course_id]
                """
            }
            let secretFile = URL(fileURLWithPath: config).deletingLastPathComponent().appending(path: "jwt").path
            // Warnings and worse only: the test reads the daemon's stderr when it stops, and a megabyte of
            // refusals at notice level would fill the pipe and stall the daemon's logging, as no journald would.
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config, "--log-level", "warning"])
            let expires = Int(Date().timeIntervalSince1970) + 3600
            let identities: JSONValue = .object([
                "none": .null,
                "realtime_key": .string("fuzz-app-key-0123456789abcdef"),
                "jwt": .string(makeToken(#"{"role":"anon","exp":\#(expires)}"#, secret: RowSecurityTests.jwtSecret)),
                "jwt_rls": .string(makeToken(#"{"role":"\#(role)","sub":"alice","session_id":"s1","exp":\#(expires)}"#, secret: RowSecurityTests.jwtSecret)),
                "console_key": .string("fuzz-console-key-0123456789abcdef"),
            ])
            let identitiesFile = URL(fileURLWithPath: config).deletingLastPathComponent().appending(path: "identities.json").path
            try identities.jsonText.write(toFile: identitiesFile, atomically: true, encoding: .utf8)

            // Rows change while the fuzzer runs, so that streams, cohorts and live queries have work to do.
            let writer = Task {
                var id = 1
                let started = ContinuousClock.now
                while ContinuousClock.now - started < .seconds(Self.seconds), !Task.isCancelled {
                    let owner = ["alice", "bob"][id % 2]
                    _ = try? database.execute("INSERT INTO todo VALUES (\(id), '\(owner)', 't\(id)', 's'); UPDATE course SET name = name WHERE id = 1")
                    id += 1
                    try? await Task.sleep(for: .milliseconds(50))
                }
            }
            defer { writer.cancel() }
            let fuzzer = try DaemonProcess(
                [
                    TestDatabase.repositoryRoot.appending(path: "scripts/fuzz-api").path,
                    "--http", "127.0.0.1:\(port)", "--socket", daemon.socketPath, "--identities", identitiesFile,
                    "--seconds", String(Self.seconds), "--jwt-secret", secretFile, "--table", "todo,course,enrols_in",
                ],
                executable: URL(fileURLWithPath: "/usr/bin/python3")
            )
            let result = try await fuzzer.finish(within: Double(Self.seconds) + 90)
            guard result.status == 0 else {
                let stopped = try? await daemon.stop(within: 30)
                Issue.record("""
                    the fuzzer failed: \(result.stdout.suffix(4000))
                    \(result.stderr.suffix(3000))
                    the daemon's log: \(stopped?.stderr.suffix(3000) ?? "(it did not stop)")
                    """)
                return
            }
            let summary = try JSONParser.parse(result.stdout.split(separator: "\n").last.map(String.init) ?? "")
            func count(_ name: String) -> Double {
                guard case .number(let number)? = summary[name] else { return 0 }
                return number.doubleValue ?? 0
            }
            #expect(count("requests") > 1000 && count("websocket_messages") > 1000, "\(summary.jsonText)")
            // Still serving, and it stops cleanly: no trap on the way out either.
            #expect(try await daemon.get("/healthz").status == 200)
            let stopped = try await daemon.stop(within: 30)
            #expect(stopped.status == 0, "\(stopped.stderr.suffix(3000))")
            #expect(!stopped.stderr.contains("Fatal error") && !stopped.stderr.contains("Swift runtime failure"), "\(stopped.stderr.suffix(3000))")
        }
    }
}
