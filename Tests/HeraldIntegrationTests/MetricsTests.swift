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
