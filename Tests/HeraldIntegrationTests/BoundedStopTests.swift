import Foundation
import Herald
import Testing

extension IntegrationTests {
    /// SIGTERM stops the daemon within the grace period whatever its peers do,
    /// and the final checkpoint is recorded first.
    @Suite
    struct BoundedStopTests {
        /// A socket stream, a Supabase WebSocket, a webhook endpoint and a NATS
        /// server that never read or answer are all open when SIGTERM comes.
        @Test func aSilentPeerOfEveryKindCannotHoldTheStop() async throws {
            let database = try TestDatabase.create()
            let blackHole = try SilentPeer()
            let realtimePort = freeLoopbackPort()
            let key = "all-0123456789abcdef"
            let config = FileManager.default.temporaryDirectory.appending(path: "pgherald-stop-\(UUID().uuidString.prefix(8)).yaml").path
            try """
                realtime:
                  listen: 127.0.0.1:\(realtimePort)
                  keys:
                    all:
                      key: \(key)
                webhooks:
                  stuck:
                    url: http://127.0.0.1:\(blackHole.port)/hook
                    secret: whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=
                nats:
                  servers: nats://127.0.0.1:\(blackHole.port)
                  stream: PGHERALD
                """.write(toFile: config, atomically: true, encoding: .utf8)
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            let stream = try SilentPeer(connectingTo: daemon.socketPath, sending: Array("GET /events HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8))
            let join = #"{"topic":"realtime:silent","event":"phx_join","payload":{"config":{"postgres_changes":[{"event":"*","schema":"public"}]}},"ref":"1","join_ref":"1"}"#
            let webSocket = try SilentPeer(connectingTo: realtimePort, sending: SilentPeer.webSocket(path: "/realtime/v1/websocket?apikey=\(key)&vsn=1.0.0", text: join))
            try await daemon.waitForSubscribers(1, kind: "sse")
            try await daemon.waitForSubscribers(1, kind: "realtime")
            // Enough to fill every buffer between the daemon and the silent readers.
            try database.execute("INSERT INTO course (short_code, name) SELECT 'S' || g, repeat('x', 90) FROM generate_series(1, 20000) g")
            try await Task.sleep(for: .seconds(2))

            let started = ContinuousClock.now
            let stopped = try await daemon.stop(within: 60)
            let took = ContinuousClock.now - started
            #expect(stopped.status == 0, "\(stopped.stderr.suffix(2000))")
            #expect(took < .seconds(6), "SIGTERM took \(took) with silent peers; the grace period is 5 s")
            #expect(stopped.stderr.contains("recorded the final checkpoint"), "\(stopped.stderr.suffix(2000))")
            let covered = try database.execute("""
                SELECT pg_visible_in_snapshot((SELECT max(txid) FROM pgherald.journal), snapshot)
                  FROM pgherald.checkpoint WHERE daemon = 'default' ORDER BY seq DESC LIMIT 1
                """).rows.first?.first ?? nil
            #expect(covered == "t", "the final checkpoint covers the last transaction")
            #expect(stopped.stderr.contains("still stopping after stop_grace"), "the log says why the stop was cut short")
            withExtendedLifetime((stream, webSocket, blackHole)) {}
        }

        /// SIGTERM at 24 moments spread over a start and past it (the process
        /// starting, the database and NATS connecting, the listeners binding,
        /// the cluster joining, serving), every other time again while it
        /// stops, with everything configured that a stop waits for: each ends
        /// within stop_grace, as a stop and not as a failure.
        @Test(.enabled(if: NATSServer.executable != nil, "scripts/test provides nats-server"))
        func sigtermAtAnyMomentOfAStartOrAStopEndsItInTime() async throws {
            let database = try TestDatabase.create()
            let nats = try await NATSServer()
            let grace = StartupFaultTests.grace
            for moment in 0..<24 {
                let config = try StartupFaultTests.configuration(nats: nats.url, ports: .init())
                let daemon = try DaemonProcess([
                    "serve", "--db", database.connInfo, "--socket", SocketDaemon.temporarySocketPath(), "--config", config, "--log-format", "logfmt",
                ])
                try await Task.sleep(for: .milliseconds(125 * moment))
                let sent = ContinuousClock.now
                daemon.signal(SIGTERM)
                if moment % 2 == 1 {
                    try await Task.sleep(for: .milliseconds(60))
                    daemon.signal(SIGTERM)
                }
                let result = try await daemon.finish(within: Double(grace.components.seconds) + 10)
                let took = ContinuousClock.now - sent
                #expect(took < grace + .seconds(1), "moment \(moment): SIGTERM took \(took): \(result.stderr.suffix(2000))")
                // Before serve traps SIGTERM, the signal's default action ends it.
                let reason = daemon.process.terminationReason
                #expect(
                    (reason == .exit && result.status == 0) || (reason == .uncaughtSignal && result.status == SIGTERM),
                    "moment \(moment): \(reason == .exit ? "exit" : "signal") \(result.status): \(result.stderr.suffix(2000))"
                )
                #expect(!result.stderr.contains("CancellationError"), "moment \(moment): \(result.stderr.suffix(2000))")
            }
        }

        /// A NATS server that takes the connection and never speaks holds the NATS output and the cluster
        /// at their handshake: a SIGTERM then ends the daemon in time, as a stop, without Hummingbird's
        /// "Waiting on child channel: CancellationError()" or "Server shutdown error: Already closed".
        @Test func aStopWhileNATSSaysNothingIsQuiet() async throws {
            let database = try TestDatabase.create()
            let silent = try loopbackListener()
            defer { close(silent.descriptor) }
            let config = try StartupFaultTests.configuration(nats: "nats://127.0.0.1:\(silent.port)", ports: .init())
            let daemon = try DaemonProcess([
                "serve", "--db", database.connInfo, "--socket", SocketDaemon.temporarySocketPath(), "--config", config, "--log-format", "logfmt",
            ])
            try await Task.sleep(for: .milliseconds(1500))
            let sent = ContinuousClock.now
            daemon.signal(SIGTERM)
            let result = try await daemon.finish(within: Double(StartupFaultTests.grace.components.seconds) + 10)
            #expect(ContinuousClock.now - sent < StartupFaultTests.grace + .seconds(1), "\(result.stderr.suffix(2000))")
            #expect(daemon.process.terminationReason == .exit && result.status == 0, "\(result.status): \(result.stderr.suffix(2000))")
            for noise in ["CancellationError", "Already closed", "level=error"] {
                #expect(!result.stderr.contains(noise), "\(noise): \(result.stderr.suffix(2000))")
            }
        }
    }
}
