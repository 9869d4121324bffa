import Foundation
import Herald
import Testing

extension IntegrationTests {
    /// Broken and malicious clients on the socket (scripts/hostile-clients)
    /// while a well-behaved subscriber receives a steady writer's events.
    @Suite
    struct HostileClientTests {
        @Test func hostileClientsLeaveTheDaemonUpAndAWellBehavedSubscriberOnTime() async throws {
            let database = try TestDatabase.create()
            let directory = FileManager.default.temporaryDirectory.appending(path: "pgherald-hostile-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let config = directory.appending(path: "pgherald.yaml").path
            try "socket:\n  max_connections: 200\n  idle_timeout: 1s\n".write(toFile: config, atomically: true, encoding: .utf8)
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            let subscriber = EventCollector(daemon.client, EventFilter(tables: [TableName(name: "course")]))
            try await daemon.waitForSubscribers(1, kind: "sse")
            let before = daemon.residentBytes

            let writes = 200
            let writer = Task {
                let connection = try database.connect()
                for index in 0..<writes {
                    try connection.execute("INSERT INTO course (short_code, name) VALUES ($1, 'steady')", parameters: ["H\(index)"])
                    try await Task.sleep(for: .milliseconds(40))
                }
            }
            let attack = try await DaemonProcess(
                ["--socket", daemon.socketPath, "--max-connections", "200", "--idle-timeout", "1"],
                executable: TestDatabase.repositoryRoot.appending(path: "scripts/hostile-clients")
            ).finish(within: 180)
            #expect(attack.status == 0, "\(attack.stderr)")
            try await writer.value

            let report = try #require(try JSONSerialization.jsonObject(with: Data(attack.stdout.utf8)) as? [String: Any], "\(attack.stdout)")
            let malformed = report["malformed"] as? [String: Int] ?? [:]
            // Every malformed request is answered 400 (or 404 for a path that parses), none left hanging.
            #expect(malformed.values.reduce(0, +) == 10_000 && Set(malformed.keys).isSubset(of: ["400", "404"]), "\(malformed)")
            #expect(report["oversized"] as? [String: Int] == ["target_9k": 414, "target_100k": 400, "header_20k": 431, "header_fields_200": 431])
            let expensive = report["expensive_filters"] as? [String: Int] ?? [:]
            #expect(expensive.count == 4 && expensive.values.allSatisfy { $0 == 400 }, "\(expensive)")
            #expect(report["beyond_connection_limit"] as? Int == 503 && report["after_idle_flood"] as? Int == 200)
            let slowloris = try #require(report["slowloris_closed_after_max"] as? Double, "a slow client was never closed")
            #expect(slowloris < 4, "idle_timeout is 1 s")
            #expect(report["vanished_mid_stream"] as? Int == 200)

            // The well-behaved subscriber got every event, on time.
            let events = try await subscriber.wait(for: writes)
            #expect(Set(events.map(\.id)).count == writes)
            // 0.7 s here during the 10,000-request burst; the bound leaves room for a slower machine, not for a stall.
            let worst = subscriber.lags.max() ?? .infinity
            #expect(worst < 5, "slowest event took \(worst) s")
            // Up, with the one stream that stayed, and memory back within bounds.
            #expect(try await daemon.get("/healthz").status == 200)
            try await daemon.waitForSubscribers(1, kind: "sse", within: 10)
            let grown = daemon.residentBytes - before
            #expect(grown < 64 << 20, "RSS grew by \(grown >> 20) MiB")
            print("hostile clients: \(attack.stdout.trimmingCharacters(in: .whitespacesAndNewlines)); worst lag \(worst) s; RSS \(before >> 20) -> \(daemon.residentBytes >> 20) MiB")
        }
    }
}
