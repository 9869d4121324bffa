import AsyncHTTPClient
import Foundation
import Herald
import Testing

extension IntegrationTests {
    /// `GET /metrics`, read by Prometheus's own text parser (scripts/parse-metrics).
    @Suite
    struct MetricsTests {
        struct Sample: Decodable {
            var name: String
            var labels: [String: String]
            var value: Double
        }

        func parse(_ text: String) throws -> [Sample] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", TestDatabase.repositoryRoot.appending(path: "scripts/parse-metrics").path]
            let input = Pipe()
            let output = Pipe()
            let errors = Pipe()
            process.standardInput = input
            process.standardOutput = output
            process.standardError = errors
            try process.run()
            input.fileHandleForWriting.write(Data(text.utf8))
            try input.fileHandleForWriting.close()
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            let problem = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            try #require(process.terminationStatus == 0, "the Prometheus parser rejected /metrics: \(problem)")
            return try JSONDecoder().decode([Sample].self, from: data)
        }

        func value(_ samples: [Sample], _ name: String, _ labels: [String: String] = [:]) -> Double? {
            samples.first { sample in sample.name == name && labels.allSatisfy { sample.labels[$0.key] == $0.value } }?.value
        }

        /// Clients of every kind come and go: a stream on the socket (SSE and NDJSON), Supabase channels by key
        /// and under row-level security, and a stream under row-level security over the network. After each
        /// step every subscriber gauge reads what `/stats` says; a kind whose last subscriber left reads 0.
        @Test func subscriberGaugesFollowStatsAsClientsComeAndGo() async throws {
            let database = try TestDatabase.create()
            let role = RowSecurityTests.makeRole()
            defer { _ = try? database.execute("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
            try RowSecurityTests.createTodos(database, role: role)
            let (realtimePort, httpPort, metricsPort) = (freeLoopbackPort(), freeLoopbackPort(), freeLoopbackPort())
            let config = try RowSecurityTests.configuration { secretFile in
                """
                realtime:
                  listen: 127.0.0.1:\(realtimePort)
                  keys:
                    all:
                      key: \(RealtimeTests.allKey)
                  jwt:
                    secret_file: \(secretFile)
                    roles:
                      \(role):
                        rls: true
                http:
                  listen: 127.0.0.1:\(httpPort)
                metrics:
                  listen: 127.0.0.1:\(metricsPort)
                """
            }
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            func agree(_ step: String) async throws {
                let statistics = try await daemon.statistics()
                let samples = try parse(try await daemon.get("/metrics").body)
                let gauges = samples.filter { $0.name == "pgherald_subscribers" }
                for gauge in gauges {
                    let kind = gauge.labels["kind"] ?? ""
                    #expect(gauge.value == Double(statistics.subscribers[kind] ?? 0), "\(step): \(kind) reads \(gauge.value), /stats says \(statistics.subscribers)")
                }
                for (kind, count) in statistics.subscribers {
                    #expect(gauges.contains { $0.labels["kind"] == kind }, "\(step): no gauge for \(kind), which /stats counts \(count) of")
                }
            }
            let token = RowSecurityTests.token(role: role, sub: "alice")
            let sse = try await RawStream(socketPath: daemon.socketPath, path: "/events?table=todo")
            let ndjson = try await RawStream(socketPath: daemon.socketPath, path: "/events?table=todo&format=ndjson")
            let keyed = try await RealtimeTestClient(port: realtimePort, apikey: RealtimeTests.allKey)
            try await RealtimeTests.join(keyed, topic: "realtime:all", bindings: #"{"event":"*","schema":"public","table":"todo"}"#)
            let underPolicies = try await RealtimeTestClient(port: realtimePort, apikey: token)
            try await RealtimeTests.join(underPolicies, topic: "realtime:mine", bindings: #"{"event":"*","schema":"public","table":"todo"}"#, token: token)
            let overNetwork = try AttackTests.Target(daemon: daemon, port: httpPort, role: role, config: config)
                .stream("/events?table=todo&format=ndjson", token: token)
            // The cohort's own feed counts as a row-security subscriber, so wait for each client by its kind.
            let expected = ["sse": 1, "ndjson": 2, "realtime": 2]
            try await waitFor {
                let subscribers = try await daemon.statistics().subscribers
                return expected.allSatisfy { subscribers[$0.key] == $0.value }
            } failure: { "the clients did not all subscribe" }
            try await agree("every kind subscribed")
            await keyed.close()
            await underPolicies.close()
            overNetwork.process.signal(SIGTERM)
            _ = try? await overNetwork.process.finish(within: 10)
            withExtendedLifetime(sse) {}
            try await waitFor { (try await daemon.statistics().subscribers["realtime"] ?? 0) == 0 } failure: { "the realtime clients did not leave" }
            try await Task.sleep(for: .milliseconds(300))
            try await agree("the realtime and network clients left")
            _ = ndjson
            // Every listener says once that it serves, in its own words; Hummingbird's line would repeat it.
            let stopped = try await daemon.stop()
            #expect(!stopped.stderr.contains("Server started"), "\(stopped.stderr)")
            for line in ["serving", "serving over the network", "serving Supabase Realtime over TCP", "serving metrics over TCP"].map({ #""msg":"\#($0)""# }) {
                #expect(stopped.stderr.components(separatedBy: line).count == 2, "\(line) once: \(stopped.stderr)")
            }
        }

        @Test func metricsParseAndAgreeWithStats() async throws {
            let database = try TestDatabase.create()
            let port = freeLoopbackPort()
            let daemon = try await SocketDaemon(database: database, arguments: ["--metrics-listen", "127.0.0.1:\(port)"])
            let stream = try await RawStream(socketPath: daemon.socketPath, path: "/events?table=course")
            #expect(try await daemon.get("/events?table=nope").status == 400)
            try database.execute("INSERT INTO course (short_code, name) VALUES ('M1', 'one'), ('M2', 'two')")
            try database.execute("UPDATE course SET name = 'uno' WHERE short_code = 'M1'")
            try database.execute("INSERT INTO student (first_name, last_name) VALUES ('Grace', 'Hopper')")
            try await waitFor { try await daemon.statistics().changeCount == 4 }
            _ = stream
            // The journal's figures are measured at most 2 s before a scrape.
            try await Task.sleep(for: .seconds(2.1))

            let (status, text) = try await daemon.get("/metrics")
            #expect(status == 200)
            let samples = try parse(text)
            let statistics = try await daemon.statistics()
            for (table, count) in statistics.tables {
                let name = String(table.split(separator: ".").last!)
                let total = samples.filter { $0.name == "pgherald_events_total" && $0.labels["table"] == name }.map(\.value).reduce(0, +)
                #expect(total == Double(count), "\(table)")
            }
            #expect(value(samples, "pgherald_events_total", ["table": "course", "op": "UPDATE"]) == 1)
            #expect(value(samples, "pgherald_change_count") == Double(statistics.changeCount))
            #expect(value(samples, "pgherald_subscribers", ["kind": "sse"]) == 1)
            #expect(value(samples, "pgherald_socket_refusals_total", ["status": "400"]) == 1)
            #expect(value(samples, "pgherald_listener_state", ["state": "listening"]) == 1)
            #expect(value(samples, "pgherald_delivery_lag_seconds_count") == 4)
            #expect((value(samples, "pgherald_journal_rows") ?? 0) >= 4)
            #expect((value(samples, "process_resident_memory_bytes") ?? 0) > 1_000_000)
            #expect((value(samples, "process_open_fds") ?? 0) > 3)
            #expect(value(samples, "process_cpu_seconds_total") != nil)

            // The same over TCP.
            let response = try await TestHTTP.client.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/metrics"), timeout: .seconds(10))
            let overTCP = try parse(String(buffer: try await response.body.collect(upTo: 1 << 20)))
            #expect(value(overTCP, "pgherald_change_count") == 4)
        }
    }
}
