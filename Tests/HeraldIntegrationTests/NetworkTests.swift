import AsyncHTTPClient
import Foundation
import Herald
import HeraldClient
import NIOHTTP1
import Synchronization
import Testing

extension IntegrationTests {
    /// The network listener (`http.listen`) over TLS: HTTP/2 and HTTP/1.1,
    /// keys and tokens, certificate reloads, and the Swift client over HTTPS.
    @Suite
    struct NetworkTests {
        static let key = "network-app-key-0123456789abcdef"
        static let consoleKey = "network-console-key-0123456789abcdef"
        static let jwtSecret = "network-jwt-secret-with-at-least-32-characters"

        /// A daemon serving over HTTPS on a free loopback port.
        struct Served {
            let daemon: SocketDaemon
            let port: Int
            let certificates: TestCertificates
            let config: String
            var base: String { "https://localhost:\(port)" }
        }

        /// The live query the key `app` may follow.
        static let courseQuery = """
            queries:
              courses:
                sql: select id, short_code, name from course order by id
                key: [id]
            """

        /// The configuration: the key `app` sees `course` and the live query
        /// `courses`; tokens of `role` are granted `roleGrant`, by default
        /// everything their row-level security lets them see; `listener`
        /// adds `http.` settings, a `key: value` a line.
        static func configuration(
            port: Int, certificates: TestCertificates, role: String = "authenticated", roleGrant: String = "rls: true", queries: String = courseQuery,
            origins: [String] = [], plaintext: Bool = false, listener: [String] = [], extra: String = ""
        ) throws -> String {
            let directory = certificates.directory
            let secretFile = directory.appending(path: "jwt").path
            try jwtSecret.write(toFile: secretFile, atomically: true, encoding: .utf8)
            let tls = plaintext ? "" : "tls:\n  cert_file: \(certificates.certificatePath)\n  key_file: \(certificates.keyPath)"
            let text = """
                http:
                  listen: 127.0.0.1:\(port)
                \(origins.isEmpty ? "" : "  cors:\n    origins: [\(origins.joined(separator: ", "))]")
                \(listener.map { "  \($0)" }.joined(separator: "\n"))
                \(tls)
                console:
                  key: \(consoleKey)
                realtime:
                  keys:
                    app:
                      key: \(key)
                      tables: [course]
                      queries: [courses]
                  jwt:
                    secret_file: \(secretFile)
                    roles:
                      \(role):
                        \(roleGrant)
                \(queries)
                log:
                  level: debug
                \(extra)
                """
            let path = directory.appending(path: "pgherald.yaml").path
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }

        static func start(
            _ database: TestDatabase, role: String = "authenticated", roleGrant: String = "rls: true", queries: String = courseQuery,
            origins: [String] = [], plaintext: Bool = false, listener: [String] = [], extra: String = "", port: Int? = nil,
            certificates: TestCertificates? = nil
        ) async throws -> Served {
            let certificates = if let certificates { certificates } else { try await TestCertificates() }
            let port = port ?? freeLoopbackPort()
            let config = try configuration(
                port: port, certificates: certificates, role: role, roleGrant: roleGrant, queries: queries, origins: origins,
                plaintext: plaintext, listener: listener, extra: extra
            )
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            return Served(daemon: daemon, port: port, certificates: certificates, config: config)
        }

        static func token(role: String = "authenticated", sub: String, expiresIn seconds: Int = 3600) -> String {
            makeToken(#"{"role":"\#(role)","sub":"\#(sub)","exp":\#(Int(Date().timeIntervalSince1970) + seconds)}"#, secret: jwtSecret)
        }

        /// `curl` against the daemon, bounded by `seconds`; its output ends with `version=` and the HTTP version used.
        static func curl(_ arguments: [String], served: Served, seconds: Int) throws -> DaemonProcess {
            try DaemonProcess(
                ["-sN", "--cacert", served.certificates.caPath, "--max-time", String(seconds), "-w", "\nversion=%{http_version}\n"] + arguments,
                executable: URL(fileURLWithPath: "/usr/bin/curl")
            )
        }

        static func get(_ served: Served, _ path: String, token: String? = nil, client: HTTPClient) async throws -> (status: UInt, body: String) {
            var request = HTTPClientRequest(url: served.base + path)
            if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
            let response = try await client.execute(request, timeout: .seconds(10))
            return (response.status.code, String(buffer: try await response.body.collect(upTo: 1 << 20)))
        }

        @Test func curlReadsEventsAndQueriesOverHTTP2AndHTTP1() async throws {
            let database = try TestDatabase.create()
            let served = try await Self.start(database, origins: ["https://app.example.com"])
            // A refusal carries the CORS headers, so that a page's fetch can read why.
            let refused = try await Self.curl(["--http2", "-D", "-", "-H", "Origin: https://app.example.com", served.base + "/events"], served: served, seconds: 5)
                .finish(within: 20).stdout
            #expect(refused.hasPrefix("HTTP/2 401") && refused.contains("access-control-allow-origin: https://app.example.com"), "\(refused)")
            #expect(refused.contains("\"error\":\"token_required\""), "\(refused)")
            let bearer = ["-H", "Authorization: Bearer \(Self.key)"]
            let events2 = try Self.curl(["--http2"] + bearer + [served.base + "/events?table=course"], served: served, seconds: 6)
            let events1 = try Self.curl(["--http1.1", served.base + "/events?table=course&access_token=\(Self.key)"], served: served, seconds: 6)
            let query2 = try Self.curl(["--http2"] + bearer + [served.base + "/queries/courses"], served: served, seconds: 6)
            let query1 = try Self.curl(["--http1.1"] + bearer + [served.base + "/queries/courses"], served: served, seconds: 6)
            try await served.daemon.waitForSubscribers(2, kind: "sse")
            try database.execute("INSERT INTO course (short_code, name) VALUES ('NET1', 'Networks')")

            for (stream, version) in [(events2, "2"), (events1, "1.1")] {
                let output = try await stream.finish(within: 20).stdout
                #expect(output.contains("event: INSERT") && output.contains("\"short_code\":\"NET1\""), "\(output)")
                #expect(output.hasSuffix("version=\(version)\n"), "\(output.suffix(40))")
            }
            for (stream, version) in [(query2, "2"), (query1, "1.1")] {
                let output = try await stream.finish(within: 20).stdout
                #expect(output.contains("event: result") && output.contains("Chemistry"), "\(output.prefix(300))")
                #expect(output.contains("NET1"), "the query's difference arrives too: \(output.suffix(300))")
                #expect(output.hasSuffix("version=\(version)\n"), "\(output.suffix(40))")
            }
            _ = try await served.daemon.stop()
        }

        @Test func tokensAreCheckedEndWithTheirExpiryAndAreNeverLogged() async throws {
            let database = try TestDatabase.create()
            let role = RowSecurityTests.makeRole()
            defer { _ = try? database.execute("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
            try RowSecurityTests.createTodos(database, role: role)
            let served = try await Self.start(database, role: role)
            let client = TestCertificates.httpClient

            func refusal(_ path: String, token: String?) async throws -> (UInt, JSONValue?) {
                let (status, body) = try await Self.get(served, path, token: token, client: client)
                return (status, try? JSONParser.parse(Array(body.utf8)))
            }
            let missing = try await refusal("/events", token: nil)
            #expect(missing.0 == 401 && missing.1?["error"] == .string("token_required"), "\(missing)")
            let wrong = try await refusal("/events", token: "not-a-key-0123456789abcdef")
            #expect(wrong.0 == 401 && wrong.1?["error"] == .string("unknown_key"), "\(wrong)")
            let expiredToken = Self.token(role: role, sub: "alice", expiresIn: -60)
            let expired = try await refusal("/events?access_token=\(expiredToken)", token: nil)
            #expect(expired.0 == 401 && expired.1?["error"] == .string("token_expired"), "\(expired)")
            let queryExpired = try await refusal("/queries/courses", token: expiredToken)
            #expect(queryExpired.0 == 401, "\(queryExpired)")
            #expect(try await refusal("/stats", token: Self.key).0 == 403, "statistics are the operator's")
            #expect(try await refusal("/metrics", token: nil).0 == 401)
            #expect(try await refusal("/stats", token: Self.consoleKey).0 == 200)
            #expect(try await refusal("/healthz", token: nil).0 == 200, "health checks need no token")

            // Alice's token sees only her rows, and its stream ends with a frame when it expires.
            let aliceToken = Self.token(role: role, sub: "alice", expiresIn: 4)
            let alice = try await RawStream(url: served.base + "/events?table=todo&access_token=\(aliceToken)", client: client)
            #expect(alice.version == .http2)
            let bobToken = Self.token(role: role, sub: "bob")
            let bob = try await RawStream(url: served.base + "/events?table=todo", headers: [("Authorization", "Bearer \(bobToken)")], client: client)
            try database.execute("INSERT INTO todo VALUES (1, 'alice', 'milk', 's1'), (2, 'bob', 'bread', 's2')")
            let seenByAlice = try await alice.text { $0.contains("\"milk\"") }
            _ = try await bob.text { $0.contains("\"bread\"") }
            let ended = try await alice.text(within: 15) { $0.contains("event: token_expired") }
            #expect(ended.contains("the token expired"), "\(ended.suffix(300))")
            try await waitFor { alice.isFinished } failure: { "the expired stream did not end" }
            #expect(!seenByAlice.contains("bread") && !seenByAlice.contains("s1"), "\(seenByAlice)")
            #expect(!bob.received.contains("milk"), "\(bob.received)")

            let stopped = try await served.daemon.stop()
            #expect(stopped.stderr.contains("refused a request over the network"))
            for secret in [Self.key, Self.consoleKey, expiredToken, aliceToken, bobToken, "not-a-key-0123456789abcdef"] {
                #expect(!stopped.stderr.contains(secret), "a token appears in the log")
            }
        }

        @Test func aCertificateReloadKeepsOpenStreamsAndReachesNewConnections() async throws {
            let database = try TestDatabase.create()
            let served = try await Self.start(database)
            let client = TestCertificates.httpClient
            let first = try await served.certificates.servedSerial(port: served.port)
            let http2 = try await RawStream(url: served.base + "/events?table=course&access_token=\(Self.key)", client: client)
            let http1 = try Self.curl(["--http1.1", served.base + "/events?table=course&access_token=\(Self.key)"], served: served, seconds: 12)
            try await served.daemon.waitForSubscribers(2, kind: "sse")

            let renewed = try await served.certificates.issue(serverNamed: "renewed")
            #expect(renewed != first)
            served.daemon.process.signal(SIGHUP)
            try await waitFor(seconds: 10) {
                try await served.certificates.servedSerial(port: served.port) == renewed
            } failure: { "new connections still get the old certificate" }

            // An unusable file on the next reload is refused with the file, and the renewed certificate stays in force.
            try "not a certificate".write(toFile: served.certificates.certificatePath, atomically: true, encoding: .utf8)
            served.daemon.process.signal(SIGHUP)
            try await Task.sleep(for: .milliseconds(500))
            #expect(try await served.certificates.servedSerial(port: served.port) == renewed)

            try database.execute("INSERT INTO course (short_code, name) VALUES ('TLS1', 'After the reload')")
            _ = try await http2.text { $0.contains("TLS1") }
            #expect(!http2.isFinished)
            let output = try await http1.finish(within: 20).stdout
            #expect(output.contains("TLS1"), "the HTTP/1.1 stream opened before the reload: \(output.suffix(300))")
            #expect(try await served.daemon.statistics().subscribers["sse"] ?? 0 >= 1)
            let stopped = try await served.daemon.stop()
            #expect(stopped.stderr.contains("reloaded the TLS certificate"))
            #expect(stopped.stderr.contains("the new configuration was rejected") && stopped.stderr.contains("cannot read a PEM certificate"))
        }

        @Test func theSwiftClientFollowsOverHTTPSWithARefreshedTokenAndResumes() async throws {
            let database = try TestDatabase.create()
            let role = RowSecurityTests.makeRole()
            defer { _ = try? database.execute("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
            try RowSecurityTests.createTodos(database, role: role)
            var served = try await Self.start(database, role: role)
            let httpClient = TestCertificates.httpClient
            // Each connection asks for a token; each lasts 3 s, so streams end and come back on fresh ones.
            let tokensGiven = Atomic(0)
            let client = HeraldClient(url: URL(string: served.base)!, httpClient: httpClient) {
                tokensGiven.add(1, ordering: .relaxed)
                return Self.token(role: role, sub: "alice", expiresIn: 3)
            }
            let received = Mutex<[Event]>([])
            let following = Task {
                for try await event in client.events(EventFilter(tables: [TableName(name: "todo")])) {
                    received.withLock { $0.append(event) }
                }
            }
            defer { following.cancel() }
            try await served.daemon.waitForSubscribers(1, kind: "sse")

            // Writes go on across token expiries and a restart of the daemon on the same port.
            for id in 1...6 {
                try database.execute("INSERT INTO todo VALUES (\(id), '\(id % 2 == 0 ? "bob" : "alice")', 'item \(id)', 's')")
                try await Task.sleep(for: .seconds(1))
            }
            _ = try await served.daemon.stop()
            try database.execute("INSERT INTO todo VALUES (7, 'alice', 'while down', 's'), (8, 'bob', 'while down', 's')")
            served = try await Self.start(database, role: role, port: served.port, certificates: served.certificates)
            try database.execute("INSERT INTO todo VALUES (9, 'alice', 'after', 's')")
            try await waitFor(seconds: 20) { received.withLock { $0.count } >= 5 } failure: { "have \(received.withLock { $0.map(\.id) })" }
            try await Task.sleep(for: .milliseconds(300))
            let ids = received.withLock { $0.compactMap { $0.new?["id"]?.jsonText } }
            #expect(ids == ["1", "3", "5", "7", "9"], "each of alice's rows once, in order, none of bob's")
            #expect(tokensGiven.load(ordering: .relaxed) >= 3, "expired tokens were replaced at reconnects")

            // A fixed token that has expired ends the stream with `unauthorized`.
            let stale = HeraldClient(url: URL(string: served.base)!, token: Self.token(role: role, sub: "alice", expiresIn: -10), httpClient: httpClient)
            await #expect(throws: HeraldClientError.self) {
                for try await _ in stale.events() {}
            }
            _ = try await served.daemon.stop()
        }

        @Test func liveQueriesTransactionsAndTheChangeNotifierOverHTTPS() async throws {
            let database = try TestDatabase.create()
            let served = try await Self.start(database)
            let httpClient = TestCertificates.httpClient
            let client = HeraldClient(url: URL(string: served.base)!, token: Self.key, httpClient: httpClient)

            struct Course: Decodable, Sendable {
                let id: Int
                let shortCode: String
            }
            let model = await LiveQueryModel(client: client, query: "courses", as: Course.self)
            let running = Task { await model.run() }
            defer { running.cancel() }
            try await waitFor { await model.rows.count == 10 } failure: { "the live query's first result did not arrive" }

            let groups = Mutex<[TransactionGroup]>([])
            let grouping = Task {
                for try await group in client.transactions(EventFilter(tables: [TableName(name: "course")])) {
                    groups.withLock { $0.append(group) }
                }
            }
            defer { grouping.cancel() }
            let notifier = await MainActor.run { ChangeNotifier(configuration: .init(quietPeriod: .milliseconds(100))) }
            let notifying = Task { @MainActor in try await notifier.follow(client, filter: EventFilter(tables: [TableName(name: "course")])) }
            defer { notifying.cancel() }
            try await served.daemon.waitForSubscribers(2, kind: "sse")

            try database.execute("BEGIN; INSERT INTO course (short_code, name) VALUES ('T1', 'One'), ('T2', 'Two'); COMMIT")
            try await waitFor { await model.rows.count == 12 } failure: { "the live query's difference did not arrive" }
            try await waitFor { groups.withLock { $0.count } == 1 } failure: { "no transaction" }
            #expect(groups.withLock { $0[0].events.count } == 2, "one transaction, whole")
            try await waitFor { await MainActor.run { notifier.changeCount } >= 1 } failure: { "the notifier did not count the change" }
            #expect(await model.rows.last?.shortCode == "T2")
            #expect(await model.failure == nil)

            let refused = await LiveQueryModel(client: HeraldClient(url: URL(string: served.base)!, token: "wrong-token-0123456789", httpClient: httpClient), query: "courses", as: Course.self)
            await refused.run()
            let failure = try #require(await refused.failure as? HeraldClientError)
            #expect(failure.code == .unauthorized, "\(failure)")
            _ = try await served.daemon.stop()
        }

        /// The page a browser app would be: on another origin, opening `count` `EventSource` streams.
        static let streamsPage = """
            <!doctype html><meta charset="utf-8"><title>pgherald streams</title><link rel="icon" href="data:,">
            <script>
            window.received = []; window.opened = 0; window.failures = 0;
            window.start = (url, count) => {
              for (let i = 0; i < count; i++) {
                window.received.push(0);
                const source = new EventSource(url);
                source.onopen = () => { window.opened++; };
                source.onerror = () => { window.failures++; };
                source.addEventListener('INSERT', () => { window.received[i]++; });
              }
              return true;
            };
            </script>
            """

        @Test func aHundredEventSourcesInChromiumShareOneHTTP2ConnectionFromAnotherOrigin() async throws {
            let database = try TestDatabase.create()
            let pagePort = freeLoopbackPort()
            let origin = "http://127.0.0.1:\(pagePort)"
            let served = try await Self.start(database, origins: [origin])
            let site = served.certificates.directory.appending(path: "site")
            try FileManager.default.createDirectory(at: site, withIntermediateDirectories: true)
            try Self.streamsPage.write(to: site.appending(path: "index.html"), atomically: true, encoding: .utf8)
            let pageServer = try DaemonProcess(
                ["-m", "http.server", "--bind", "127.0.0.1", "--directory", site.path, String(pagePort)], executable: URL(fileURLWithPath: "/usr/bin/python3")
            )
            try await waitFor { (try? await TestHTTP.client.execute(HTTPClientRequest(url: origin + "/index.html"), timeout: .seconds(2)).status) == .ok }
            let browser = try HeadlessBrowser(extraArguments: ["--ignore-certificate-errors"])
            let page = try await browser.open(origin + "/index.html")
            try await browser.send("Network.enable", session: page.session)

            let streams = 100
            let url = "\(served.base)/events?table=course&access_token=\(Self.key)"
            try await page.evaluate("start(\(page.quoted(url)), \(streams))")
            try await page.waitUntil("window.opened === \(streams)", within: 30)
            try await served.daemon.waitForSubscribers(streams, kind: "sse")
            let rows = 20
            for batch in 0..<4 {
                try database.execute("INSERT INTO course (short_code, name) SELECT 'B\(batch)_' || g, 'Batch' FROM generate_series(1, \(rows / 4)) g")
            }
            try await page.waitUntil("window.received.every(count => count === \(rows))", within: 30)
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await page.evaluate("window.received.every(count => count === \(rows)) && window.failures === 0") == .bool(true), "no event twice, no error")
            #expect(page.errors.isEmpty, "\(page.errors)")

            let responses = browser.events(of: page.session).filter {
                $0["method"]?.stringValue == "Network.responseReceived" && ($0["params"]?["response"]?["url"]?.stringValue ?? "").contains("/events?")
            }
            #expect(responses.count == streams)
            let protocols = Set(responses.compactMap { $0["params"]?["response"]?["protocol"]?.stringValue })
            let connections = Set(responses.compactMap { $0["params"]?["response"]?["connectionId"]?.jsonText })
            #expect(protocols == ["h2"], "\(protocols)")
            #expect(connections.count == 1, "every stream over one connection: \(connections)")
            let headers = responses.first?["params"]?["response"]?["headers"]
            #expect(headers?["access-control-allow-origin"] == .string(origin), "\(headers ?? .null)")
            withExtendedLifetime(pageServer) {}
            _ = try await served.daemon.stop()
        }

        /// Supabase's Python client, signed in as two users, over `wss://`
        /// through the network listener: each sees exactly their rows.
        @Test func supabaseClientsOverTLSThroughTheNetworkListener() async throws {
            let python = try #require(ProcessInfo.processInfo.environment["PGHERALD_TEST_REALTIME_PYTHON"], "scripts/test sets it")
            let database = try TestDatabase.create()
            let role = RowSecurityTests.makeRole()
            defer { _ = try? database.execute("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
            try RowSecurityTests.createTodos(database, role: role)
            let served = try await Self.start(database, role: role)
            let script = TestDatabase.repositoryRoot.appending(path: "tests/realtime/row_security_test.py").path
            let result = try await DaemonProcess(
                [script, "--url", "wss://localhost:\(served.port)/realtime/v1", "--alice", Self.token(role: role, sub: "alice"),
                 "--bob", Self.token(role: role, sub: "bob"), "--dsn", database.connInfo],
                environment: ["SSL_CERT_FILE": served.certificates.caPath],
                executable: URL(fileURLWithPath: python)
            ).finish(within: 90)
            #expect(result.status == 0 && result.stdout.hasSuffix("OK\n"), "\(result.stderr.suffix(2000))")
            _ = try await served.daemon.stop()
        }

        /// The nginx configuration in docs/operations.md, as written there, in
        /// front of a plain listener on loopback: streams unbuffered over
        /// HTTP/2, the Supabase WebSocket upgraded, and no token in its access log.
        @Test func theDocumentedNginxConfigurationFrontsAPlainListener() async throws {
            let nginx = "/usr/sbin/nginx"
            try #require(FileManager.default.isExecutableFile(atPath: nginx), "scripts/test installs nginx-light")
            let python = try #require(ProcessInfo.processInfo.environment["PGHERALD_TEST_REALTIME_PYTHON"], "scripts/test sets it")
            let database = try TestDatabase.create()
            let role = RowSecurityTests.makeRole()
            defer { _ = try? database.execute("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
            try RowSecurityTests.createTodos(database, role: role)
            let served = try await Self.start(database, role: role, plaintext: true)

            let operations = try String(contentsOf: TestDatabase.repositoryRoot.appending(path: "docs/operations.md"), encoding: .utf8)
            let start = try #require(operations.range(of: "```nginx\n"))
            let end = try #require(operations.range(of: "\n```", range: start.upperBound..<operations.endIndex))
            let proxyPort = freeLoopbackPort()
            let prefix = served.certificates.directory.appending(path: "nginx")
            try FileManager.default.createDirectory(at: prefix, withIntermediateDirectories: true)
            let site = String(operations[start.upperBound..<end.lowerBound])
                .replacingOccurrences(of: "listen 443 ssl http2;", with: "listen 127.0.0.1:\(proxyPort) ssl http2;")
                .replacingOccurrences(of: "/etc/letsencrypt/live/herald.example.com/fullchain.pem", with: served.certificates.certificatePath)
                .replacingOccurrences(of: "/etc/letsencrypt/live/herald.example.com/privkey.pem", with: served.certificates.keyPath)
                .replacingOccurrences(of: "/var/log/nginx/herald.log", with: prefix.appending(path: "access.log").path)
                .replacingOccurrences(of: "proxy_pass http://127.0.0.1:8080;", with: "proxy_pass http://127.0.0.1:\(served.port);")
            #expect(site.contains("proxy_pass http://127.0.0.1:\(served.port);") && site.contains(served.certificates.keyPath), "\(site)")
            let temporary = prefix.path
            try """
                pid \(temporary)/nginx.pid;
                error_log \(temporary)/error.log;
                events {}
                http {
                    client_body_temp_path \(temporary)/body;
                    proxy_temp_path \(temporary)/proxy;
                \(site)
                }
                """.write(to: prefix.appending(path: "nginx.conf"), atomically: true, encoding: .utf8)
            let proxy = try DaemonProcess(["-p", temporary, "-c", prefix.appending(path: "nginx.conf").path, "-g", "daemon off; user root;"], executable: URL(fileURLWithPath: nginx))
            try await waitFor(seconds: 10) { loopbackAccepts(port: proxyPort) } failure: { "nginx did not listen" }

            let token = Self.token(role: role, sub: "alice")
            let stream = try await RawStream(url: "https://localhost:\(proxyPort)/events?table=todo&access_token=\(token)", client: TestCertificates.httpClient)
            #expect(stream.version == .http2)
            try await served.daemon.waitForSubscribers(1, kind: "sse")
            try database.execute("INSERT INTO todo VALUES (1, 'alice', 'through nginx', 's')")
            _ = try await stream.text(within: 3) { $0.contains("through nginx") }

            let script = TestDatabase.repositoryRoot.appending(path: "tests/realtime/row_security_test.py").path
            try database.execute("DELETE FROM todo")
            let realtime = try await DaemonProcess(
                [script, "--url", "wss://localhost:\(proxyPort)/realtime/v1", "--alice", token, "--bob", Self.token(role: role, sub: "bob"),
                 "--dsn", database.connInfo],
                environment: ["SSL_CERT_FILE": served.certificates.caPath], executable: URL(fileURLWithPath: python)
            ).finish(within: 90)
            #expect(realtime.status == 0 && realtime.stdout.hasSuffix("OK\n"), "\(realtime.stderr.suffix(2000))")

            proxy.signal(SIGTERM)
            _ = try await proxy.finish(within: 10)
            let accessLog = try String(contentsOf: prefix.appending(path: "access.log"), encoding: .utf8)
            // The WebSocket's URL carried the token as apikey; the log holds its path only.
            #expect(accessLog.contains("GET /realtime/v1/websocket") && !accessLog.contains(token), "\(accessLog)")
            _ = try await served.daemon.stop()
        }

        @Test func plainHTTPOffLoopbackNeedsSayingSo() async throws {
            let directory = FileManager.default.temporaryDirectory.appending(path: "pgherald-plain-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let path = directory.appending(path: "pgherald.yaml").path
            try "database: dbname=none\nhttp:\n  listen: 0.0.0.0:8443\n".write(toFile: path, atomically: true, encoding: .utf8)
            let refused = try await DaemonProcess(["check-config", path]).finish()
            #expect(refused.status != 0 && refused.stderr.contains("is not loopback, and there is no TLS"), "\(refused.stderr)")
            try "database: dbname=none\nhttp:\n  listen: 0.0.0.0:8443\n  plaintext: true\n".write(toFile: path, atomically: true, encoding: .utf8)
            let warned = try await DaemonProcess(["check-config", path]).finish()
            #expect(warned.status == 0, "\(warned.stderr)")
            #expect((warned.stdout + warned.stderr).contains("unencrypted"))
            try "database: dbname=none\nhttp:\n  listen: 127.0.0.1:8443\n  cors:\n    origins: [https://app.example.com/path]\n".write(toFile: path, atomically: true, encoding: .utf8)
            let badOrigin = try await DaemonProcess(["check-config", path]).finish()
            #expect(badOrigin.status != 0 && badOrigin.stderr.contains("is not an origin"), "\(badOrigin.stderr)")
        }
    }
}
