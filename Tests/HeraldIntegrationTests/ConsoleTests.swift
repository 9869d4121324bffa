import AsyncHTTPClient
import Foundation
import Herald
import NIOHTTP1
import Synchronization
import Testing

extension IntegrationTests {
    /// The console in headless Chromium against a running daemon and a real
    /// database; its access rules over plain HTTP on both listeners.
    @Suite
    struct ConsoleTests {
        static let key = "console-key-0123456789abcdef"
        static let realtimeKey = "realtime-key-0123456789abcdef"
        static let secret = "whsec_" + Data((0..<32).map { UInt8($0 * 5 % 251) }).base64EncodedString()

        /// A configuration with the console on `port`, and a webhook endpoint `strict` at `hook`.
        static func configuration(port: Int, hook: String, extra: String = "") throws -> String {
            let directory = FileManager.default.temporaryDirectory.appending(path: "pgherald-console-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let keyFile = directory.appending(path: "console.key").path
            try (key + "\n").write(toFile: keyFile, atomically: true, encoding: .utf8)
            let text = """
                console:
                  listen: 127.0.0.1:\(port)
                  key_file: \(keyFile)
                webhooks:
                  strict:
                    url: \(hook)
                    secret: \(secret)
                \(extra)
                """
            let path = directory.appending(path: "pgherald.yaml").path
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }

        static func psql(_ database: TestDatabase, _ sql: String) async throws {
            let result = try await DaemonProcess(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", sql, database.connInfo], executable: URL(fileURLWithPath: "/usr/bin/psql"))
                .finish(within: 20)
            try #require(result.status == 0, "psql: \(result.stderr)")
        }

        static func tcp(_ port: Int, _ path: String, method: HTTPMethod = .GET, key: String? = nil) async throws -> (status: UInt, body: String) {
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
            request.method = method
            if let key { request.headers.add(name: "Authorization", value: "Bearer \(key)") }
            let response = try await TestHTTP.client.execute(request, timeout: .seconds(10))
            return (response.status.code, String(buffer: try await response.body.collect(upTo: 1 << 20)))
        }

        @Test func theConsoleFollowsChangesFiltersPausesReplaysAndRefusesAWrongKey() async throws {
            let database = try TestDatabase.create()
            let receiver = try await WebhookReceiver()
            let refusing = Mutex(true)
            receiver.answer { _, _ in refusing.withLock { $0 } ? .status(400) : .status(200) }
            let port = freeLoopbackPort()
            let config = try Self.configuration(port: port, hook: receiver.url("/strict"))
            var daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            let browser = try HeadlessBrowser()
            let page = try await browser.open("http://127.0.0.1:\(port)/console?key=\(Self.key)")

            try await page.waitUntil("!document.getElementById('main').hidden && document.getElementById('health-badge').textContent === 'listening'")
            #expect(try await page.evaluate("location.search") == .string(""), "the key leaves the address bar")
            #expect(try await page.text("#viewer").contains("controls allowed"))
            try await page.waitUntil("document.getElementById('tail-status').textContent.startsWith('following')")

            // A row inserted with psql appears in the tail, which follows the stream, and moves the counter.
            try await Self.psql(database, "INSERT INTO course (short_code, name) VALUES ('ADA3M', 'Drama')")
            let committed = ContinuousClock.now
            try await page.waitUntil("document.querySelector('#tail li')?.textContent.includes('INSERT public.course')")
            let shown = ContinuousClock.now - committed
            #expect(shown < .seconds(1), "the row took \(shown) from psql's commit to the tail")
            // The counter comes with the page's state, polled once a second: up to a second later.
            try await page.waitUntil("document.getElementById('change-count').textContent === '1'")

            // An UPDATE opens side by side, with the changed column marked.
            try await Self.psql(database, "UPDATE course SET name = 'Drama and Theatre' WHERE short_code = 'ADA3M'")
            try await page.waitUntil("document.querySelector('#tail li')?.textContent.includes('UPDATE')")
            try await page.evaluate("document.querySelector('#tail li').click()")
            let changed = try await page.evaluate("[...document.querySelectorAll('#detail-rows tr')].filter(r => r.querySelector('td.changed')).map(r => r.cells[0].textContent)")
            #expect(changed == .array([.string("name")]))

            // A filter hides what it should.
            try await page.evaluate("document.getElementById('filter-table').value = 'student'; document.querySelector('#filter button[type=submit]').click()")
            try await page.waitUntil("document.getElementById('tail-status').textContent.includes('table=student')")
            try await Self.psql(database, "INSERT INTO course (short_code, name) VALUES ('HIDE1', 'hidden')")
            try await Self.psql(database, "INSERT INTO student (first_name, last_name) VALUES ('Ada', 'Shown')")
            try await page.waitUntil("document.querySelector('#tail li')?.textContent.includes('public.student')")
            #expect(try await page.evaluate("document.querySelectorAll('#tail li').length") == .number(JSONNumber(1)), "the course row was filtered out")

            // Paused, nothing is added; resumed, what came meanwhile follows.
            try await page.evaluate("document.getElementById('pause').click()")
            try await Self.psql(database, "INSERT INTO student (first_name, last_name) VALUES ('Grace', 'WhilePaused')")
            try await Task.sleep(for: .milliseconds(700))
            #expect(try await page.evaluate("document.querySelectorAll('#tail li').length") == .number(JSONNumber(1)))
            try await page.evaluate("document.getElementById('pause').click()")
            try await page.waitUntil("document.querySelectorAll('#tail li').length === 2")

            // The rate counts the changes in its window, not only those of the last poll.
            try await page.waitUntil("/^[1-9][0-9]* changes? in the last [0-9]+ s \\([0-9.]+\\/s\\)$/.test(document.getElementById('rate').textContent)")
            #expect(page.errors == [], "the page logged errors")

            // A daemon restart: the page reconnects and the tail resumes.
            _ = try await daemon.stop()
            daemon = try await SocketDaemon(database: database, socketPath: daemon.socketPath, arguments: ["--config", config])
            try await Self.psql(database, "INSERT INTO student (first_name, last_name) VALUES ('Alan', 'AfterRestart')")
            try await page.waitUntil("document.querySelector('#tail li')?.textContent.includes('public.student') && document.querySelectorAll('#tail li').length === 3", within: 15)

            // The refused delivery is a dead letter; the replay button sends it again.
            try await page.waitUntil("document.querySelector('button.replay') !== null", within: 15)
            refusing.withLock { $0 = false }
            let before = receiver.requests.count
            let letter = try #require(try await page.evaluate("document.querySelector('button.replay').dataset.id").stringValue)
            try await page.evaluate("document.querySelector('button.replay').click()")
            let requests = try await receiver.wait { $0.count > before }
            #expect(requests.last?.text.contains("ADA3M") == true, "the first dead letter is the first insert's")
            // Queued, and then gone from the list once delivered.
            try await page.waitUntil("document.querySelector('button.replay[data-id=\"\(letter)\"]') === null")
            // Answered 200 since: no error to show.
            try await page.waitUntil("[...document.querySelectorAll('#webhooks tbody tr')].some(r => r.cells[0].textContent === 'strict' && r.cells[4].textContent === 'none')")
            #expect(page.errors.filter { !$0.contains("ERR_CONNECTION_REFUSED") } == [], "the page logged errors besides the restart's")

            // Screenshots, wide and at a phone's width, where nothing may overflow sideways.
            let shots = ProcessInfo.processInfo.environment["PGHERALD_TEST_SCREENSHOTS"].map { URL(fileURLWithPath: $0) }
                ?? FileManager.default.temporaryDirectory.appending(path: "pgherald-console-shots")
            try FileManager.default.createDirectory(at: shots, withIntermediateDirectories: true)
            try await page.setViewport(width: 1280, height: 900)
            try await Task.sleep(for: .milliseconds(300))
            try await page.screenshot().write(to: shots.appending(path: "console.png"))
            try await page.setViewport(width: 390, height: 844, mobile: true)
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth") == .bool(true), "the page is wider than a phone")
            try await page.screenshot().write(to: shots.appending(path: "console-phone.png"))

            // A wrong key is refused, and says so.
            let stranger = try await browser.open("http://127.0.0.1:\(port)/console?key=not-the-key-at-all")
            try await stranger.waitUntil("!document.getElementById('login').hidden && document.getElementById('key-error').textContent.length > 0")
            #expect(try await stranger.evaluate("document.getElementById('main').hidden") == .bool(true))
            #expect(try await stranger.evaluate("document.querySelectorAll('#tail li').length") == .number(JSONNumber(0)))
            withExtendedLifetime(daemon) {}
        }

        @Test func onTCPOnlyTheConsoleIsServedAndEachKeySeesItsGrant() async throws {
            let database = try TestDatabase.create()
            let port = freeLoopbackPort()
            let secretFile = FileManager.default.temporaryDirectory.appending(path: "pgherald-console-jwt-\(UUID().uuidString.prefix(8))").path
            let secret = "console-test-jwt-secret-with-32-characters"
            try secret.write(toFile: secretFile, atomically: true, encoding: .utf8)
            let config = try Self.configuration(port: port, hook: "http://127.0.0.1:9/never", extra: """
                realtime:
                  keys:
                    viewer:
                      key: \(Self.realtimeKey)
                      tables: [course]
                  jwt:
                    secret_file: \(secretFile)
                    roles:
                      anon:
                        tables: [course]
                """)
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            try database.execute("INSERT INTO course (short_code, name) VALUES ('A', 'a'); INSERT INTO student (first_name, last_name) VALUES ('S', 's')")
            try await waitFor { try await daemon.statistics().changeCount == 2 }

            #expect(try await Self.tcp(port, "/console").status == 200, "the page itself asks for nothing")
            #expect(try await Self.tcp(port, "/console/state").status == 401)
            #expect(try await Self.tcp(port, "/console/state", key: "wrong-key-0123456789").status == 401)
            #expect(try await Self.tcp(port, "/stats", key: Self.key).status == 404, "the socket's API stays on the socket")
            #expect(try await Self.tcp(port, "/events?key=wrong-key-0123456789").status == 401)

            let full = try await Self.tcp(port, "/console/state", key: Self.key)
            #expect(full.body.contains("\"mayControl\":true") && full.body.contains("public.student"))
            // Nothing listens at the endpoint: its deliveries wait for their next retry, which the console shows.
            try await waitFor(seconds: 20) {
                try await Self.tcp(port, "/console/state", key: Self.key).body.contains("\"nextRetryAt\"")
            } failure: { "no next retry in /console/state" }
            let viewer = try await Self.tcp(port, "/console/state", key: Self.realtimeKey)
            #expect(viewer.status == 200)
            #expect(viewer.body.contains("\"mayControl\":false") && viewer.body.contains("public.course"))
            #expect(!viewer.body.contains("public.student"), "a key sees only the tables it is granted")
            #expect(!viewer.body.contains("deadLetters"), "dead letters are for viewers that see every table")
            #expect(try await Self.tcp(port, "/console/dead-letters/1/replay", method: .POST, key: Self.realtimeKey).status == 403)
            #expect(try await Self.tcp(port, "/events?table=student&key=\(Self.realtimeKey)").status == 403)
            // A user's token reads its rows through /events, never the daemon's figures.
            let userToken = makeToken(#"{"role":"anon","sub":"u1","exp":\#(Int(Date().timeIntervalSince1970) + 600)}"#, secret: secret)
            let asUser = try await Self.tcp(port, "/console/state", key: userToken)
            #expect(asUser.status == 403 && asUser.body.contains("console_needs_a_key"), "\(asUser)")
            let stopped = try await daemon.stop()
            #expect(stopped.stderr.contains("refused a replay from the console"), "a refused control is logged")
        }

        @Test func onTheSocketThePeersAccessRulesDecideWhatTheConsoleShows() async throws {
            let database = try TestDatabase.create()
            let peer: UInt32 = 60_011
            let config = try Self.configuration(port: freeLoopbackPort(), hook: "http://127.0.0.1:9/never", extra: """
                socket:
                  mode: "666"
                access:
                  courses:
                    user: \(peer)
                    tables: [course]
                    queries: [course_names, student_names]
                queries:
                  course_names:
                    sql: select id, name from course
                    key: [id]
                  student_names:
                    sql: select id, first_name from student
                    key: [id]
                """)
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            try database.execute("INSERT INTO course (short_code, name) VALUES ('A', 'a'); INSERT INTO student (first_name, last_name) VALUES ('S', 's')")
            try await waitFor { try await daemon.statistics().changeCount == 2 }
            let client = PeerClient(userID: peer, groupID: peer, socketPath: daemon.socketPath)
            let page = try await client.get("/console")
            #expect(page.status == 200 && page.body.contains("pgherald console"))
            let state = try await client.get("/console/state")
            #expect(state.status == 200)
            #expect(state.body.contains("public.course") && !state.body.contains("public.student"))
            #expect(state.body.contains("\"mayControl\":false"))
            // Granted by name, a query is shown only when every table it reads is granted too, as /queries/NAME decides.
            #expect(state.body.contains("course_names") && !state.body.contains("student_names"), "\(state.body)")
            let stats = try await client.get("/stats")
            #expect(stats.body.contains("course_names") && !stats.body.contains("student_names"))
            #expect(try await client.get("/console/dead-letters/1/replay", method: "POST").status == 403)
        }

        @Test func aConsoleOnTCPWithoutAnyKeyIsRefusedAtLoad() async throws {
            let directory = FileManager.default.temporaryDirectory.appending(path: "pgherald-console-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let path = directory.appending(path: "pgherald.yaml").path
            try "console:\n  listen: 127.0.0.1:8080\n".write(toFile: path, atomically: true, encoding: .utf8)
            let result = try await DaemonProcess(["check-config", path]).finish(within: 20)
            #expect(result.status != 0)
            #expect((result.stdout + result.stderr).contains("console.listen") && (result.stdout + result.stderr).contains("key"), "\(result.stdout)\(result.stderr)")
        }
    }
}
