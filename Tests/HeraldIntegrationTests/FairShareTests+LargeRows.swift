import Foundation
import Herald
import Synchronization
import Testing

extension IntegrationTests.FairShareTests {
    /// Streams that never read, fed rows of 1 MB: a stream took up to 512
    /// events at a time and framed them in one write, and its buffer counted
    /// events, not bytes, so it never fell behind; ten such streams held
    /// 1.6 GB and kept their sockets. Now a write frames at most 1 MiB past
    /// its first event, and `socket.subscriber_buffer_bytes` (16 MiB) makes a
    /// stream fall behind as `socket.subscriber_buffer` does: it is then cut
    /// once it stalls, and a bystander keeps its pace.
    @Test func streamsThatNeverReadHoldBoundedBytesOfLargeRows() async throws {
        let database = try TestDatabase.create()
        try database.execute("CREATE TABLE note (id serial PRIMARY KEY, body text)")
        let daemon = try await SocketDaemon(database: database)
        let watcher = try await Bystander(socket: daemon)
        // The rows alone cost the daemon their reading: the bystander is measured against them, then with the streams too.
        let writeRows = { @Sendable () async throws -> Int in
            for _ in 0..<4 { try database.execute("INSERT INTO note (body) SELECT repeat('q', 1000000) FROM generate_series(1, 20)") }
            try await Task.sleep(for: .seconds(1))
            return daemon.residentBytes
        }
        let (_, rowsAlone) = try await watcher.measure("80 rows of 1 MB, no other stream", during: writeRows)
        let before = daemon.residentBytes
        let stalled = try (0..<10).map { _ in try StalledClient(socketPath: daemon.socketPath, path: "/events?table=note&format=ndjson") }
        try await daemon.waitForSubscribers(11, kind: "ndjson")  // and the bystander's
        let (after, underAttack) = try await watcher.measure("the same to ten streams that never read", during: writeRows)
        try await watcher.expectFairShare(idle: rowsAlone, underAttack: underAttack)
        let grown = max(after, daemon.residentBytes) - before
        print("ten streams that never read, 80 rows of 1 MB: the daemon grew by \(grown >> 20) MiB")
        // Each stream holds one write of at most a few MB; the rows themselves are the history's, shared.
        // The history (96 MiB) turns over during the measurement, and the allocator keeps some of the
        // megabyte rows' freed pages: 60 to 140 MiB were seen. Before the bound, the streams held 1.6 GB.
        #expect(grown < 256 << 20, "the daemon grew by \(grown >> 20) MiB for streams that never read")
        try await waitFor(seconds: 20) { stalled.allSatisfy(\.isHungUpByPeer) } failure: {
            "\(stalled.filter { !$0.isHungUpByPeer }.count) of 10 streams that never read are still open"
        }
        await watcher.close()
        _ = try await daemon.stop()
    }

    /// The same on the Supabase endpoint: `postgres_changes` frames for a
    /// socket that never reads were framed 256 events at a time and counted
    /// in nothing, so ten sockets held 1.3 GB. Now a channel frames at most
    /// 1 MiB past its first event, and its events wait within
    /// `realtime.max_queued_bytes`; past that the channel is ended with an
    /// error, and its client rejoins.
    ///
    /// Each socket joins 20 channels: each channel framed its batch before it
    /// waited for the socket, so 999 channels of one user held 2.4 GB and
    /// stalled a bystander for 3.8 s. Now a channel frames only once its
    /// socket is writable.
    @Test func realtimeSocketsThatNeverReadHoldBoundedBytesOfLargeRows() async throws {
        let database = try TestDatabase.create()
        try database.execute("CREATE TABLE note (id serial PRIMARY KEY, body text)")
        let (daemon, port, _) = try await IntegrationTests.RealtimeTests.start(database)
        let join = #"{"config":{"broadcast":{"ack":false,"self":false},"presence":{"key":"","enabled":false},"private":false,"postgres_changes":[{"event":"*","schema":"public","table":"note"}]}}"#
        let watcher = try await Bystander(realtimePort: port, apikey: IntegrationTests.RealtimeTests.coursesKey, database: database)
        let writeRows = { @Sendable () async throws -> Int in
            for _ in 0..<4 { try database.execute("INSERT INTO note (body) SELECT repeat('q', 1000000) FROM generate_series(1, 20)") }
            try await Task.sleep(for: .seconds(1))
            return daemon.residentBytes
        }
        let quiet = try await watcher.measure("quiet", rows: 10)
        let (_, rowsAlone) = try await watcher.measure("80 rows of 1 MB, no other channel", during: writeRows)
        let before = daemon.residentBytes
        let silent = Peers()
        try silent.list.withLock { list in list = try (0..<10).map { _ in
            try SilentPeer(connectingTo: port, sending: Self.webSocketUpgrade(port: port, apikey: IntegrationTests.RealtimeTests.allKey)
                + (1...20).flatMap { Self.textFrame(#"["\#($0)","\#($0)","realtime:notes-\#($0)","phx_join",\#(join)]"#) })
        } }
        try await waitFor(seconds: 20) { try await daemon.statistics().subscribers["realtime"] ?? 0 >= 201 } failure: { "the silent sockets did not join" }
        let (after, underAttack) = try await watcher.measure("the same to ten sockets of 20 channels that never read", during: writeRows)
        try await watcher.expectFairShare(idle: rowsAlone, underAttack: underAttack)
        let grown = max(after, daemon.residentBytes) - before
        print("ten realtime sockets of 20 channels that never read, 80 rows of 1 MB: the daemon grew by \(grown >> 20) MiB")
        // As above; before the bound, the sockets held 1.3 GB.
        #expect(grown < 256 << 20, "the daemon grew by \(grown >> 20) MiB for sockets that never read")
        // Closed, the 200 channels frame nothing: each framed its waiting rows as its socket closed, and the
        // bystander, on the same event loops, waited seconds.
        let (_, closing) = try await watcher.measure("while the ten sockets close") {
            silent.list.withLock { $0 = [] }
            try await Task.sleep(for: .seconds(3))
            return 0
        }
        try await watcher.expectFairShare(idle: quiet, underAttack: closing)
        await watcher.close()
        _ = try await daemon.stop()
    }
}

/// Silent peers that a test closes while it measures (by dropping them).
private final class Peers: Sendable {
    let list = Mutex<[SilentPeer]>([])
}
