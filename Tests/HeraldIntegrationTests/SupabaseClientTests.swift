import Foundation
import Testing

extension IntegrationTests {
    /// Supabase's own Python client, `realtime` from PyPI (pinned in
    /// tests/realtime/requirements.txt, installed into a venv by scripts/test),
    /// against the daemon over TCP, plus the Unix socket with a raw WebSocket.
    @Suite
    struct SupabaseClientTests {
        @Test func thePythonClientSubscribesUnchangedAndRidesOutARestart() async throws {
            let python = try #require(
                ProcessInfo.processInfo.environment["PGHERALD_TEST_REALTIME_PYTHON"],
                "PGHERALD_TEST_REALTIME_PYTHON is not set; scripts/test installs the client and sets it"
            )
            let database = try TestDatabase.create()
            var (daemon, port, config) = try await RealtimeTests.start(database)
            let script = TestDatabase.repositoryRoot.appending(path: "tests/realtime/supabase_client_test.py").path
            let client = try DaemonProcess(
                [script, "--port", String(port), "--key", RealtimeTests.allKey, "--socket", daemon.socketPath, "--dsn", database.connInfo],
                executable: URL(fileURLWithPath: python), withInput: true
            )
            do {
                _ = try await client.readLine(within: 60) { $0 == "RESTART" }
            } catch {
                let result = try await client.finish(within: 5)
                Issue.record("the client stopped before the restart (\(result.status)): \(result.stderr)")
                return
            }
            _ = try await daemon.stop()
            daemon = try await SocketDaemon(database: database, socketPath: daemon.socketPath, arguments: ["--config", config])
            client.write(line: "restarted")
            let result = try await client.finish(within: 60)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.hasSuffix("OK\n"), "\(result.stdout)")
            _ = try await daemon.stop()
        }
    }
}
