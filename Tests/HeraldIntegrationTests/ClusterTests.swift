import Foundation
import Herald
import Testing

extension IntegrationTests {
    /// Daemons of one `cluster:` against a real 3-node NATS cluster on loopback.
    @Suite(.enabled(if: NATSServer.executable != nil && ProcessInfo.processInfo.environment["PGHERALD_TEST_REALTIME_PYTHON"] != nil,
                    "scripts/test provides nats-server and realtime-py"))
    struct ClusterTests {
        static let key = "cluster-key-0123456789"
        /// What the tests allow a dead daemon's presence to take to leave: `member_timeout` 5 s plus a heartbeat, with room for a busy machine.
        static let presenceBound = 10.0

        /// Three daemons on one database, each first trying another NATS node.
        /// - Parameter onlyNode: a daemon index whose only server is the node of the same index.
        /// - Parameter first: more configuration for the first daemon.
        func daemons(
            _ database: TestDatabase, _ nats: NATSCluster, count: Int = 3, onlyNode: Int? = nil, first: String = ""
        ) async throws -> [(daemon: SocketDaemon, port: Int)] {
            var started: [(SocketDaemon, Int)] = []
            for index in 0..<count {
                let port = freeLoopbackPort()
                let servers = index == onlyNode ? [nats.urls[index]] : (0..<3).map { nats.urls[(index + $0) % 3] }
                let config = FileManager.default.temporaryDirectory.appending(path: "pgherald-cluster-\(UUID().uuidString.prefix(8)).yaml").path
                try """
                    realtime:
                      listen: 127.0.0.1:\(port)
                      keys:
                        all:
                          key: \(Self.key)
                    cluster:
                      name: test
                      nats: [\(servers.joined(separator: ", "))]
                      member: member-\(index)
                    \(index == 0 ? first : "")
                    """.write(toFile: config, atomically: true, encoding: .utf8)
                started.append((try await SocketDaemon(database: database, arguments: ["--config", config, "--name", "member-\(index)"]), port))
            }
            for (daemon, _) in started {
                try await waitFor(seconds: 20) { try await daemon.statistics().cluster?.members.count == count } failure: {
                    "the cluster did not form: \(count) members expected"
                }
            }
            return started
        }

        /// realtime-py clients on a database daemon and two edges: broadcasts
        /// (WebSocket and REST) reach every member once, presence is the union
        /// of all three, and an edge killed with SIGKILL takes its clients'
        /// presence with it within the bound.
        /// A database daemon and two edges on one host, all under the default `--name` and with no
        /// `cluster.member`, were one member `HOST/default` that heard nobody: now three members, each
        /// seeing the three. Two edges given one id say so: an error line, and the cluster output degraded.
        @Test func daemonsOnOneHostAreMembersApartAndTwinsAreTold() async throws {
            let database = try TestDatabase.create()
            let nats = try await NATSServer()
            let source = try await SocketDaemon(database: database, arguments: ["--config", try EdgeTests.write("""
                nats:
                  servers: [\(nats.url)]
                  stream: PGHERALD
                  create_stream: true
                cluster:
                  name: host
                  nats: [\(nats.url)]
                """)])
            try await waitFor(seconds: 30) { try await source.statistics().outputs?["nats"]?.health == "ok" } failure: { "the nats output" }
            func edge(member: String?) async throws -> SocketDaemon {
                try await SocketDaemon(database: database, arguments: ["--config", try EdgeTests.write("""
                    source: nats
                    cluster:
                      name: host
                      nats: [\(nats.url)]
                      stream: PGHERALD
                    \(member.map { "  member: \($0)" } ?? "")
                    """)])
            }
            var daemons = [source, try await edge(member: nil), try await edge(member: nil)]
            for daemon in daemons {
                try await waitFor(seconds: 20) { try await daemon.statistics().cluster?.members.count == 3 } failure: { "a member did not see the other two" }
            }
            let names = Set(try await daemons[0].statistics().cluster?.members.map(\.name) ?? [])
            #expect(names.count == 3 && names.allSatisfy { $0.hasSuffix("/default/\($0.split(separator: "/").last ?? "")") }, "\(names)")

            let twins = [try await edge(member: "twin"), try await edge(member: "twin")]
            daemons += twins
            for twin in twins {
                try await waitFor(seconds: 20) { try await twin.statistics().outputs?["cluster"]?.health == "degraded" } failure: { "a twin did not notice" }
                #expect(try await twin.statistics().outputs?["cluster"]?.reason?.contains("another daemon is cluster member twin") == true)
                // As docs/cluster.md says: /healthz shows it too, while the daemon goes on serving.
                let health = try await twin.get("/healthz")
                #expect(health.status == 200 && health.body.contains(#""degraded":{"cluster":"another daemon is cluster member twin"#), "\(health)")
            }
            for twin in twins {
                let stopped = try await twin.stop()
                #expect(stopped.stderr.contains("another daemon is this cluster's member twin"), "\(stopped.stderr.suffix(2000))")
            }
            for daemon in daemons.prefix(3) { _ = try await daemon.stop() }
        }

        @Test func broadcastsAndPresenceSpanTheDaemonsAndADeadOnesPresenceLeaves() async throws {
            let python = try #require(ProcessInfo.processInfo.environment["PGHERALD_TEST_REALTIME_PYTHON"])
            let database = try TestDatabase.create()
            let nats = try await NATSCluster()
            let members = try await EdgeTests.start(database, nats)
            let script = TestDatabase.repositoryRoot.appending(path: "tests/realtime/cluster_test.py").path
            let client = try DaemonProcess(
                [script, "--ports", String(members.databasePort)] + members.ports.map(String.init) + [
                    "--key", EdgeTests.key, "--kill-pid", String(members.edges[1].process.process.processIdentifier), "--bound", String(Self.presenceBound),
                ],
                executable: URL(fileURLWithPath: python)
            )
            let result = try await client.finish(within: 120)
            #expect(result.status == 0, "\(result.stderr.suffix(3000))")
            #expect(result.stdout.hasSuffix("OK\n"), "\(result.stdout)")

            // The survivors' view: the database daemon and one edge, and the traffic between them.
            let statistics = try #require(try await members.database.statistics().cluster)
            #expect(statistics.members.map(\.name) == ["db", "edge-0"], "\(statistics.members)")
            #expect(statistics.members.map(\.role) == ["database", "edge"])
            #expect(statistics.broadcastsSent >= 1 && statistics.broadcastsReceived >= 2, "\(statistics)")
            let metrics = try await members.database.get("/metrics").body
            #expect(metrics.contains("pgherald_cluster_members 2"), "\(metrics.split(separator: "\n").filter { $0.contains("cluster") })")
            #expect(metrics.contains("pgherald_cluster_broadcasts_received_total 2"))
            let status = try DaemonProcess(["status", "--socket", members.edges[0].socketPath])
            let shown = try await status.finish()
            #expect(shown.stdout.contains("cluster:     test via nats://127.0.0.1:"), "\(shown.stdout)")
            #expect(shown.stdout.contains("edge-0  edge") && shown.stdout.contains("db      database"), "\(shown.stdout)")
            #expect(shown.stdout.contains("source:      nats stream PGHERALD, at sequence"), "\(shown.stdout)")
            _ = try await members.edges[0].stop()
            _ = try await members.database.stop()
        }

        /// The NATS node a daemon uses dies: it moves to another node, and a
        /// client joining elsewhere afterwards still sees what its clients track
        /// and hears their broadcasts.
        @Test func aDaemonWhoseNATSNodeDiesMovesOnAndItsClientsStayVisible() async throws {
            let database = try TestDatabase.create()
            let nats = try await NATSCluster()
            let consolePort = freeLoopbackPort()
            // The operator's key is its own: a realtime key may not be the console's.
            let consoleKey = "cluster-console-key-0123456789"
            let members = try await daemons(database, nats, count: 2, first: "console:\n  listen: 127.0.0.1:\(consolePort)\n  key: \(consoleKey)")
            let join = #"{"config":{"broadcast":{"self":false},"presence":{"key":"KEY","enabled":true},"private":false,"postgres_changes":[]}}"#
            let alice = try await RealtimeTestClient(port: members[0].port, apikey: Self.key)
            try await alice.send(joinRef: "1", ref: "1", topic: "realtime:office", event: "phx_join", payload: join.replacingOccurrences(of: "KEY", with: "alice"))
            _ = try await alice.next(within: 10, "alice's join") { $0.event == "phx_reply" }
            try await alice.send(joinRef: "1", ref: "2", topic: "realtime:office", event: "presence", payload: #"{"type":"presence","event":"track","payload":{"at":"desk"}}"#)
            _ = try await alice.next(within: 10, "alice's track") { $0.event == "phx_reply" && $0.ref == .string("2") }

            nats.kill(0)
            try await waitFor(seconds: 30) {
                let server = try await members[0].daemon.statistics().cluster?.server
                return server != nil && server != nats.urls[0]
            } failure: { "member-0 did not move to another NATS node" }

            let bob = try await RealtimeTestClient(port: members[1].port, apikey: Self.key)
            try await bob.send(joinRef: "1", ref: "1", topic: "realtime:office", event: "phx_join", payload: join.replacingOccurrences(of: "KEY", with: "bob"))
            let state = try await bob.next(within: 10, "bob's presence_state") { $0.event == "presence_state" }
            if state.payload["alice"] == nil {
                // Joined while member-1 waited for member-0's state: it comes as a diff within the bound.
                _ = try await bob.next(within: Self.presenceBound, "alice's presence at bob") { $0.event == "presence_diff" && $0.payload["joins"]?["alice"] != nil }
            }
            try await alice.send(joinRef: "1", ref: "3", topic: "realtime:office", event: "broadcast", payload: #"{"type":"broadcast","event":"note","payload":{"n":1}}"#)
            let note = try await bob.next(within: 10, "alice's broadcast at bob") { $0.event == "broadcast" }
            #expect(note.payload["payload"]?["n"] == .number(JSONNumber(1)))

            // The console lists the members, this daemon first, with the node it moved to.
            let browser = try HeadlessBrowser()
            let page = try await browser.open("http://127.0.0.1:\(consolePort)/console?key=\(consoleKey)")
            try await page.waitUntil("document.querySelector('#cluster table')?.rows.length === 3")
            let cluster = try await page.text("#cluster")
            #expect(cluster.contains("Cluster test (nats://127.0.0.1:"), "\(cluster)")
            #expect(!cluster.contains(nats.urls[0] + ";"), "\(cluster)")
            #expect(cluster.contains("member-0") && cluster.contains("this daemon") && cluster.contains("member-1"), "\(cluster)")
            try await nats.restart(0)
            for member in members { _ = try await member.daemon.stop() }
        }

        /// A daemon that loses NATS altogether: its client's presence leaves
        /// the other daemons within the bound, and is announced again once its
        /// NATS node is back.
        @Test func aDaemonThatLosesNATSLeavesAndIsAnnouncedAgainWhenItReturns() async throws {
            let database = try TestDatabase.create()
            let nats = try await NATSCluster()
            let members = try await daemons(database, nats, count: 2, onlyNode: 1)
            let join = #"{"config":{"broadcast":{"self":false},"presence":{"key":"KEY","enabled":true},"private":false,"postgres_changes":[]}}"#
            let alice = try await RealtimeTestClient(port: members[0].port, apikey: Self.key)
            try await alice.send(joinRef: "1", ref: "1", topic: "realtime:office", event: "phx_join", payload: join.replacingOccurrences(of: "KEY", with: "alice"))
            _ = try await alice.next(within: 10, "alice's join") { $0.event == "phx_reply" }
            let bob = try await RealtimeTestClient(port: members[1].port, apikey: Self.key)
            try await bob.send(joinRef: "1", ref: "1", topic: "realtime:office", event: "phx_join", payload: join.replacingOccurrences(of: "KEY", with: "bob"))
            _ = try await bob.next(within: 10, "bob's join") { $0.event == "phx_reply" }
            try await bob.send(joinRef: "1", ref: "2", topic: "realtime:office", event: "presence", payload: #"{"type":"presence","event":"track","payload":{"at":"home"}}"#)
            _ = try await alice.next(within: 10, "bob's presence at alice") { $0.event == "presence_diff" && $0.payload["joins"]?["bob"] != nil }

            nats.kill(1)
            let lost = ContinuousClock.now
            _ = try await alice.next(within: Self.presenceBound, "bob leaving alice's presence") { $0.event == "presence_diff" && $0.payload["leaves"]?["bob"] != nil }
            #expect(ContinuousClock.now - lost < .seconds(Self.presenceBound))
            try await waitFor(seconds: 15) { try await members[1].daemon.statistics().outputs?["cluster"]?.health == "degraded" }
            #expect(try await members[0].daemon.statistics().cluster?.members.map(\.name) == ["member-0"])

            try await nats.restart(1)
            _ = try await alice.next(within: 30, "bob back in alice's presence") { $0.event == "presence_diff" && $0.payload["joins"]?["bob"] != nil }
            try await waitFor(seconds: 15) { try await members[1].daemon.statistics().cluster?.members.count == 2 }
            for member in members { _ = try await member.daemon.stop() }
        }
    }
}
