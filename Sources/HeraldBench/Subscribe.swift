import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import Herald
import HeraldRealtime
import Synchronization

/// SUBSCRIBERS streams on the daemon's socket, every event checked.
struct Subscribe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Open SSE or Supabase Realtime streams on pgherald's socket and measure what arrives.")

    enum StreamProtocol: String, ExpressibleByArgument {
        case sse, realtime
    }

    @Option(help: "The daemon's socket.")
    var socket: String

    @Option(help: "With --protocol sse: a TCP listener of the daemon instead, such as https://localhost:8443 (HTTP/2 over TLS), or http:// with --http1.")
    var url: String?

    @Flag(help: "With --url: HTTP/1.1, a connection per stream (over TLS for https://).")
    var http1 = false

    @Option(help: "With --url: the PEM file of the CA that issued the daemon's certificate.")
    var caFile: String?

    @Option(help: "With --url: the token presented (Authorization: Bearer).")
    var token: String?

    @Option(help: "With --url: streams per HTTP/2 connection, as a browser tab's connection carries them.")
    var streamsPerConnection = 100

    @Option(help: "Concurrent streams.")
    var subscribers: Int = 1

    @Option(help: "Event-loop threads the streams are spread over.")
    var threads: Int = 1

    @Option(help: "sse (GET /events) or realtime (WebSocket, Supabase Realtime postgres_changes on bench_event).")
    var `protocol`: StreamProtocol = .sse

    @Option(help: "With --protocol sse: GET this path instead of /events, on another server's socket (scenario x.: nginx + nchan).")
    var path: String?

    @Option(help: "With a number N: GET /events?group=transaction, every message checked to hold N events (the writers' rows per transaction).")
    var transactionSize: Int?

    @Option(help: "With --protocol sse: follow this table alone (GET /events?table=NAME), each event's key id checked for gaps instead of count; its writer must be one, so that ids come in commit order.")
    var followTable: String?

    @Option(help: "With --protocol sse: for this many seconds from the start, a reconnect that fails or finds the daemon not ready is tried again every 100–200 ms (scenario y.: the daemon restarts under the streams). 0: one failed reconnect ends the stream.")
    var reconnectSeconds: Double = 0

    @Option(help: "With --protocol realtime: the table joined (public).")
    var table = "bench_event"

    @Option(help: "With --protocol realtime: sign each client in as a user, with an HS256 token signed with the secret on this file's first line (scenario s.).")
    var rlsSecretFile: String?

    @Option(help: "The role claim of the users' tokens.")
    var rlsRole = "bench_user"

    @Option(help: "Users the clients are spread over: client i is user i % N, in team (i % N) % --teams.")
    var users = 100

    @Option(help: "Teams: the table's row id % N is its team, and each client expects its team's rows only.")
    var teams = 10

    @Flag(help: "Give every client's token a claim of its own, so each is a cohort of its own: one check per subscriber, Supabase's method.")
    var rlsPerDevice = false

    @Flag(help: "Without row-level security: each client's binding filters its team's rows (team=eq.T), for the same deliveries by filter.")
    var teamFilter = false

    @OptionGroup var run: RunOptions

    func run() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        switch self.protocol {
        case .sse:
            let transport = try transportMaker()
            var path = self.path ?? (transactionSize == nil ? "/events" : "/events?group=transaction")
            if let followTable {
                path += (transactionSize == nil ? "?" : "&") + "table=" + followTable
            }
            let reconnectUntil = reconnectSeconds > 0 ? nowMicroseconds() + Int64(reconnectSeconds * 1e6) : nil
            try await measure(try await Fleet.connect(subscribers: subscribers, group: group) { [transactionSize, followTable, path] loop in
                let stream = SSEStream(transport: transport(loop), path: path, eventLoop: loop)
                stream.transactionSize = transactionSize
                stream.countsByKey = followTable != nil
                stream.reconnectUntil = reconnectUntil
                return stream
            })
        case .realtime:
            let clients = try realtimeClients()
            let next = Mutex(0)
            let teams = teamsFollowed ? teams : 1
            try await measure(try await Fleet.connect(subscribers: subscribers, group: group) { [socket] loop in
                let index = next.withLock { index in
                    defer { index += 1 }
                    return index
                }
                return RealtimeStream(socketPath: socket, eventLoop: loop, client: clients(index), teams: teams)
            }, stride: teams)
        }
        try await group.shutdownGracefully()
    }

    /// How the streams made on an event loop reach the daemon: the socket, or
    /// that loop's HTTP/2 connections to `--url`. Called on the loop.
    private func transportMaker() throws -> @Sendable (any EventLoop) -> StreamTransport {
        guard let url else { return { [socket] _ in .unixSocket(socket) } }
        guard let components = URLComponents(string: url), let host = components.host, let port = components.port, let token,
              components.scheme == "https" ? caFile != nil : (components.scheme == "http" && http1) else {
            throw ValidationError("--url is https://HOST:PORT with --ca-file, or http://HOST:PORT with --http1; and --token")
        }
        if http1 {
            let tls = try caFile.map { try HTTP2Connections.tlsContext(trusting: $0, offering: "http/1.1") }
            return { _ in .http1(host: host, port: port, tls: tls, token: token) }
        }
        let tls = try HTTP2Connections.tlsContext(trusting: caFile ?? "")
        let perLoop = Mutex<[ObjectIdentifier: NIOLoopBound<HTTP2Connections>]>([:])
        let streams = streamsPerConnection
        return { loop in
            let connections = perLoop.withLock { table in
                if let existing = table[ObjectIdentifier(loop)] { return existing }
                let made = NIOLoopBound(HTTP2Connections(eventLoop: loop, host: host, port: port, tls: tls, streamsPerConnection: streams), eventLoop: loop)
                table[ObjectIdentifier(loop)] = made
                return made
            }
            return .http2(connections.value, token: token)
        }
    }

    /// Whether each client sees one team's rows.
    private var teamsFollowed: Bool { rlsSecretFile != nil || teamFilter }

    /// What client `index` presents and joins.
    private func realtimeClients() throws -> @Sendable (Int) -> RealtimeStream.Client {
        let joined = table
        guard teamsFollowed else { return { _ in RealtimeStream.Client(table: joined) } }
        let secret = try rlsSecretFile.map { try String(contentsOfFile: $0, encoding: .utf8).split(separator: "\n").first.map(String.init) ?? "" }
        let tokens = secret.map { RealtimeCredentials.Tokens(secret: Array($0.utf8), roles: [:]) }
        let (users, teams, role, perDevice) = (users, teams, rlsRole, rlsPerDevice)
        let expires = Int(Date().timeIntervalSince1970) + 86_400
        return { index in
            let user = index % users
            let team = user % teams
            // As Supabase's tokens: a session per device, which the daemon keeps apart unless told no policy reads it.
            var claims: JSONObject = [
                "role": .string(role), "sub": .string("u\(user)"), "exp": .number(JSONNumber(Int64(expires))),
                "session_id": .string("device-\(index)"),
            ]
            if perDevice { claims["device"] = .number(JSONNumber(Int64(index))) }
            return RealtimeStream.Client(
                table: joined, apikey: tokens?.sign(claims: claims), filter: tokens == nil ? "team=eq.\(team)" : nil, team: UInt64(team)
            )
        }
    }

    private func measure<Stream>(_ fleet: Fleet<Stream>, stride: Int = 1) async throws {
        let (committed, readyCPU, readyWall) = try run.awaitCommittedCount()
        let expected = committed / stride
        let deadline = nowMicroseconds() + Int64(run.wait * 1e6)
        var tally = try await fleet.tally(expected: expected, latencies: false)
        // A team's streams expect committed ÷ teams rows or one more: wait for the exact total too.
        func waiting(_ tally: Fleet<Stream>.Tally) -> Bool {
            tally.complete + tally.failedStreams < subscribers
                || (tally.failedStreams == 0 && tally.record.received * stride < committed * subscribers)
        }
        while waiting(tally), nowMicroseconds() < deadline {
            try await Task.sleep(for: .milliseconds(100))
            tally = try await fleet.tally(expected: expected, latencies: false)
        }
        let cpu = processCPUSeconds() - readyCPU
        let wall = Double(nowMicroseconds() - readyWall) / 1e6
        tally = try await fleet.tally(expected: expected, latencies: true)
        try await fleet.stop()
        let sorted = tally.record.latencies.sorted()
        let result = LoadResult(
            scenario: run.scenario,
            label: run.label,
            subscribers: subscribers,
            expectedPerSubscriber: expected,
            received: tally.record.received,
            // Each team's streams expect its rows, and the teams hold equally many streams: all of them expect committed × subscribers ÷ teams.
            deliveredRatio: committed * subscribers == 0 ? 1 : Double(tally.record.received) * Double(stride) / Double(committed * subscribers),
            missing: tally.record.missing,
            duplicatedOrReordered: tally.record.duplicatedOrReordered,
            foreign: stride > 1 ? tally.record.foreign : nil,
            overflows: tally.record.overflows,
            resumes: tally.record.resumes,
            failedStreams: tally.failedStreams,
            firstFailure: tally.firstFailure,
            latencyMilliseconds: LoadResult.Latency(sorted: sorted),
            latencyCDF: LoadResult.cdf(sorted: sorted),
            firstReceiptMicroseconds: tally.firstReceipt,
            lastReceiptMicroseconds: tally.record.received > 0 ? tally.record.lastReceiptMicroseconds : nil,
            clientCPUSeconds: cpu,
            clientWallSeconds: wall,
            clientThreads: threads
        )
        try result.print()
    }
}

extension LoadResult {
    /// One JSON line on standard output.
    func print() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        FileHandle.standardOutput.write(try encoder.encode(self) + Data("\n".utf8))
    }
}
