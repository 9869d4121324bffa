import Foundation
import Testing

extension IntegrationTests {
    /// Every way a start can fail ends the daemon within `stop_grace`, with
    /// a nonzero status and one error line that names the cause first, while
    /// everything that could hold it up is configured: the NATS output, the
    /// cluster, realtime, and the network, console and metrics listeners.
    /// A failed start with `nats:` used to loop on `CancellationError`,
    /// thousands of lines a second, and ignore SIGTERM.
    @Suite(.enabled(if: NATSServer.executable != nil, "scripts/test provides nats-server"))
    struct StartupFaultTests {
        /// `stop_grace` in these tests' configuration.
        static let grace: Duration = .seconds(3)
        /// What a failed start may take beyond `stop_grace`: the process's own start and its first connections.
        static let slack: Duration = .seconds(3)

        /// A TCP port for each listener.
        struct Ports {
            var http = freeLoopbackPort()
            var realtime = freeLoopbackPort()
            var metrics = freeLoopbackPort()
            var console = freeLoopbackPort()
        }

        /// A configuration file with every output and listener that a stop waits for; `edge`:
        /// fed by the cluster's stream (`source: nats`), which takes the place of the NATS output.
        static func configuration(nats: String, cluster: String? = nil, ports: Ports, edge: Bool = false, extra: String = "") throws -> String {
            let path = FileManager.default.temporaryDirectory.appending(path: "pgherald-faults-\(UUID().uuidString.prefix(8)).yaml").path
            let output = edge ? "source: nats" : """
                nats:
                  servers: \(nats)
                  stream: PGHERALD
                  create_stream: true
                """
            try """
                stop_grace: \(grace.components.seconds)s
                http:
                  listen: 127.0.0.1:\(ports.http)
                console:
                  listen: 127.0.0.1:\(ports.console)
                  key: faults-console-key-0123456789abcdef
                metrics:
                  listen: 127.0.0.1:\(ports.metrics)
                realtime:
                  listen: 127.0.0.1:\(ports.realtime)
                  keys:
                    all:
                      key: faults-0123456789abcdef
                \(output)
                cluster:
                  name: faults
                  nats: \(cluster ?? nats)
                  member: faults-1
                \(edge ? "  stream: PGHERALD" : "")
                \(extra)
                """.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }

        enum Fault: String, CaseIterable, CustomTestStringConvertible {
            case httpPortTaken, realtimePortTaken, metricsPortTaken, consolePortTaken, socketPathTaken
            case nameTaken, postgresDown, postgresRefusesTheRole, roleWithoutTheGrants
            case natsDown, clusterNATSDown, edgeNATSDown, certificateNotItsKey

            var testDescription: String { rawValue }
        }

        @Test(arguments: Fault.allCases)
        func aFailedStartEndsInTimeNamingItsCause(fault: Fault) async throws {
            let database = try TestDatabase.create()
            let nats = try await NATSServer()
            var ports = Ports()
            var connInfo = database.connInfo
            let socket = SocketDaemon.temporarySocketPath()
            var natsURL = nats.url
            var clusterURL: String?
            var edge = false
            var extra = ""
            var otherKey = ""
            // A configuration refused before anything starts exits EX_CONFIG.
            var status: Int32 = 1
            var held: [Int32] = []
            defer { for descriptor in held { close(descriptor) } }
            var first: SocketDaemon?
            // How the one error line begins, after "Error: ".
            let cause: String
            switch fault {
            case .httpPortTaken:
                let taken = try loopbackListener()
                held.append(taken.descriptor)
                ports.http = taken.port
                cause = "http.listen 127.0.0.1:\(taken.port): address already in use"
            case .realtimePortTaken:
                let taken = try loopbackListener()
                held.append(taken.descriptor)
                ports.realtime = taken.port
                cause = "realtime.listen 127.0.0.1:\(taken.port): address already in use"
            case .metricsPortTaken:
                let taken = try loopbackListener()
                held.append(taken.descriptor)
                ports.metrics = taken.port
                cause = "metrics.listen 127.0.0.1:\(taken.port): address already in use"
            case .consolePortTaken:
                let taken = try loopbackListener()
                held.append(taken.descriptor)
                ports.console = taken.port
                cause = "console.listen 127.0.0.1:\(taken.port): address already in use"
            case .socketPathTaken:
                held.append(try Self.unixListener(at: socket))
                cause = "socket.path \(socket): another process serves it"
            case .nameTaken:
                first = try await SocketDaemon(database: database)
                cause = "another pgherald serve runs under --name default on this database"
            case .postgresDown:
                connInfo = "host=127.0.0.1 port=\(freeLoopbackPort()) user=postgres dbname=\(database.name)"
                cause = "cannot connect"
            case .postgresRefusesTheRole:
                connInfo += " user=pgherald_no_such_role"
                cause = "cannot connect"
            case .roleWithoutTheGrants:
                // Roles belong to the cluster: a new one, named after this test's database, with no grant at all.
                let role = "\(database.name)_stranger"
                try database.execute("CREATE ROLE \(role) LOGIN")
                connInfo += " user=\(role)"
                // check-config --connect's words, which name the grant to make; 78, as systemd is not to retry it.
                cause = "database role \(role) lacks what serve needs in the pgherald schema (USAGE ON SCHEMA pgherald and "
                status = 78
            case .natsDown:
                // The cluster's NATS answers: the output's is the one down.
                clusterURL = natsURL
                natsURL = "nats://127.0.0.1:\(freeLoopbackPort())"
                cause = "nats.servers: no NATS server takes the NATS output's connection (\(natsURL): connection refused)"
            case .clusterNATSDown:
                clusterURL = "nats://127.0.0.1:\(freeLoopbackPort())"
                cause = "cluster.nats: no NATS server takes the cluster's connection (\(clusterURL!): connection refused)"
            case .edgeNATSDown:
                natsURL = "nats://127.0.0.1:\(freeLoopbackPort())"
                edge = true
                // The edge's feed and its cluster link each try the server; either may be first to say so.
                cause = "cluster.nats: no NATS server takes the "
            case .certificateNotItsKey:
                let (certificate, key) = (try await TestCertificates(), try await TestCertificates())
                otherKey = key.keyPath
                extra = "tls:\n  cert_file: \(certificate.certificatePath)\n  key_file: \(otherKey)"
                status = 78
                cause = "configuration: tls.cert_file"
            }
            let config = try Self.configuration(nats: natsURL, cluster: clusterURL, ports: ports, edge: edge, extra: extra)

            let started = ContinuousClock.now
            let daemon = try DaemonProcess(["serve", "--db", connInfo, "--socket", socket, "--config", config, "--log-format", "logfmt"])
            let result = try await daemon.finish(within: Double((Self.grace + Self.slack).components.seconds) + 10)
            let took = ContinuousClock.now - started

            #expect(took < Self.grace + Self.slack, "\(fault) took \(took): \(result.stderr.suffix(3000))")
            #expect(daemon.process.terminationReason == .exit && result.status == status, "status \(result.status): \(result.stderr.suffix(3000))")
            let errors = result.stderr.split(separator: "\n").filter {
                $0.hasPrefix("Error:") || $0.contains("level=error") || $0.contains("level=critical")
            }
            #expect(errors.count == 1 && errors.first?.hasPrefix("Error: \(cause)") == true, "\(result.stderr.suffix(3000))")
            #expect(!result.stderr.contains("CancellationError") && !result.stderr.contains("Already closed"), "\(result.stderr.suffix(3000))")
            // It stopped of itself, not because the deadline cut the stop short.
            #expect(!result.stderr.contains("still stopping after stop_grace"), "\(result.stderr.suffix(3000))")
            if fault == .postgresRefusesTheRole { #expect(errors.first?.contains("pgherald_no_such_role") == true, "\(errors)") }
            if fault == .certificateNotItsKey {
                #expect(errors.first?.contains("\(otherKey) is not the key of the certificate") == true && errors.first?.contains("failedToLoadPrivateKey") == false, "\(errors)")
            }
            // The daemon that held the name still serves.
            if let first { #expect(try await first.get("/healthz").status == 200) }
        }

        /// `check-config --connect` finds what would stop serve's NATS clients (nothing listening) and
        /// warns of what an edge would wait for (a stream no database daemon made yet); once both are
        /// there, it names what it found.
        @Test func checkConfigConnectFindsWhatWouldStopTheNATSClients() async throws {
            let database = try TestDatabase.create()
            let nats = try await NATSServer()
            func check(_ config: String) async throws -> (status: Int32, stdout: String, stderr: String) {
                try await DaemonProcess(["check-config", "--connect", config], environment: ["PGHERALD_DATABASE": database.connInfo]).finish(within: 30)
            }
            let down = "nats://127.0.0.1:\(freeLoopbackPort())"
            let nothingListens = try await check(try Self.configuration(nats: down, cluster: nats.url, ports: Ports()))
            #expect(nothingListens.status == 78, "\(nothingListens.stderr)")
            #expect(nothingListens.stderr.contains("\nError: nats.servers: no NATS server takes the NATS output's connection (\(down): connection refused)"), "\(nothingListens.stderr)")

            let edge = try Self.configuration(nats: nats.url, ports: Ports(), edge: true)
            // An edge started before any database daemon waits for the stream, as serve does: a warning.
            let noStream = try await check(edge)
            #expect(noStream.status == 0, "\(noStream.stderr)")
            #expect(noStream.stderr.contains("\nwarning: cluster.nats: \(nats.url): JetStream has no stream PGHERALD yet; the edge waits for it"), "\(noStream.stderr)")

            let databaseDaemon = try Self.configuration(nats: nats.url, ports: Ports())
            let beforeTheStream = try await check(databaseDaemon)
            #expect(beforeTheStream.status == 0, "\(beforeTheStream.stderr)")
            #expect(beforeTheStream.stdout.contains("# nats.servers: \(nats.url) takes the NATS output's connection, and has JetStream; the output creates stream PGHERALD"), "\(beforeTheStream.stdout)")
            let filling = try await SocketDaemon(database: database, arguments: ["--config", databaseDaemon])
            let found = try await check(edge)
            #expect(found.status == 0, "\(found.stderr)")
            #expect(found.stdout.contains("# cluster.nats: \(nats.url) takes the edge's connection, and has JetStream stream PGHERALD"), "\(found.stdout)")
            #expect(found.stdout.contains("# cluster.nats: \(nats.url) takes the cluster's connection"), "\(found.stdout)")
            _ = try await filling.stop()
        }

        /// A Unix socket at `path` that accepts connections, as another daemon's would.
        static func unixListener(at path: String) throws -> Int32 {
            let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            let bound = withUnixSocketAddress(path) { bind(descriptor, $0, $1) }
            guard bound == 0, listen(descriptor, 16) == 0 else {
                close(descriptor)
                throw ProcessTimeout(description: "cannot listen on \(path): errno \(errno)")
            }
            return descriptor
        }
    }
}
