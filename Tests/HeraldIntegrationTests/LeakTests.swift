import Foundation
import Herald
import Synchronization
import Testing

extension IntegrationTests {
    /// Known secret values run through every path, and everything the
    /// daemon and its commands print, serve or write is searched for them.
    @Suite
    struct LeakTests {
        let password = "pw-LEAK-\(UUID().uuidString.prefix(8))"
        let webhookKey = Data((0..<32).map { UInt8(($0 * 37 + 11) % 251) }).base64EncodedString()
        let headerToken = "hdr-LEAK-\(UUID().uuidString.prefix(8))"
        let directory: URL = {
            let url = FileManager.default.temporaryDirectory.appending(path: "pgherald-leak-\(UUID().uuidString.prefix(8))")
            try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            return url
        }()

        var secrets: [String] { [password, webhookKey, headerToken] }

        func write(_ text: String, to name: String) throws -> String {
            let path = directory.appending(path: name).path
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }

        func leaks(in outputs: [(String, String)]) -> [String] {
            outputs.flatMap { name, text in secrets.filter { text.contains($0) }.map { "\(name) shows \($0.prefix(12))…" } }
        }

        @Test func noSecretAppearsInAnyOutput() async throws {
            let database = try TestDatabase.create()
            let receiver = try await WebhookReceiver()
            receiver.answer { _, _ in .status(500) }
            let passwordFile = try write(password + "\n", to: "db-password")
            let secretFile = try write("whsec_\(webhookKey)\n", to: "hook-secret")
            let eventLog = directory.appending(path: "events.jsonl").path
            let config = try write("""
                password_file: \(passwordFile)
                stdout: json
                event_log:
                  path: \(eventLog)
                webhooks:
                  failing:
                    url: \(receiver.url())
                    secret_file: \(secretFile)
                    timeout: 1s
                    headers:
                      Authorization: Bearer \(headerToken)

                """, to: "pgherald.yaml")
            var outputs: [(String, String)] = []

            let check = try await DaemonProcess(["check-config", config]).finish()
            #expect(check.status == 0, "\(check.stderr)")
            outputs += [("check-config", check.stdout + check.stderr)]

            // Running: events, failing webhooks, a reconnect, /stats and /metrics, then SIGTERM.
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config, "--log-level", "debug"])
            try database.execute("INSERT INTO course (short_code, name) VALUES ('LK1', 'leak'), ('LK2', 'leak')")
            try await waitFor(seconds: 15) { ((try? await daemon.statistics().webhooks?["failing"]?.failures) ?? 0) > 0 }
            try database.execute("""
                SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE datname = current_database() AND application_name = 'pgherald'
                """)
            try await Task.sleep(for: .seconds(1))
            try await daemon.waitUntilHealthy()
            outputs += [("/stats", try await daemon.get("/stats").body), ("/metrics", try await daemon.get("/metrics").body)]
            for arguments in [["list"], ["dead", "--json"]] {
                let result = try await DaemonProcess(["webhooks"] + arguments + ["--config", config, "--db", database.connInfo]).finish()
                outputs += [("webhooks \(arguments[0])", result.stdout + result.stderr)]
            }
            let stopped = try await daemon.stop()
            outputs += [("serve", stopped.stdout + stopped.stderr), ("event log", (try? String(contentsOfFile: eventLog, encoding: .utf8)) ?? "")]
            #expect(stopped.stderr.contains("reconnect") || stopped.stderr.contains("connection"), "the reconnect was logged")

            // Start-up failures and bad configurations.
            let closedPort = "host=127.0.0.1 port=1 connect_timeout=2 user=postgres password=\(password)"
            for (name, arguments) in [
                ("serve, database down", ["serve", "--db", closedPort, "--no-socket"]),
                ("check-config, password in --db", ["check-config", config]),
                ("serve, malformed conninfo", ["serve", "--db", "host=/tmp password=\(password) dbname", "--no-socket"]),
                ("serve, malformed URI", ["serve", "--db", "postgresql://u:\(password)@127.0.0.1:notaport/db", "--no-socket"]),
            ] {
                let result = try await DaemonProcess(arguments, environment: ["PGHERALD_DATABASE": closedPort]).finish(within: 30)
                outputs += [(name, result.stdout + result.stderr)]
            }
            for (name, text) in [
                ("unknown key", "webhooks:\n  a:\n    url: http://127.0.0.1:1/\n    secret: whsec_\(webhookKey)\n    retries: 3\n"),
                ("bad secret", "webhooks:\n  a:\n    url: http://127.0.0.1:1/\n    secret: whsec_\(headerToken)!\n"),
                ("header beside a bad url", "webhooks:\n  a:\n    url: ftp://x\n    secret: whsec_\(webhookKey)\n    headers:\n      Authorization: \(headerToken)\n"),
                ("database with a password", "database: \"host=127.0.0.1 port=1 password='\(password)'\"\nunknown: 1\n"),
            ] {
                let result = try await DaemonProcess(["check-config", try write(text, to: "bad.yaml")]).finish()
                #expect(result.status != 0, "\(name) was accepted")
                outputs += [("check-config, \(name)", result.stdout + result.stderr)]
            }
            let found = leaks(in: outputs)
            #expect(found.isEmpty, "\(found)")
        }
    }
}
