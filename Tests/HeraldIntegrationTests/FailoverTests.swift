import Foundation
import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// A failover: the primary dies, its streaming standby is promoted, and
    /// every connection of the daemon finds the new primary through libpq's
    /// multi-host conninfo (`target_session_attrs=read-write`).
    @Suite
    struct FailoverTests {
        /// scripts/pg-cluster with `arguments`, on a thread of its own (it blocks).
        func cluster(_ arguments: String) async throws {
            let script = TestDatabase.repositoryRoot.appending(path: "scripts/pg-cluster").path
            let status = await withCheckedContinuation { continuation in
                Thread { continuation.resume(returning: system("'\(script)' \(arguments) >/dev/null")) }.start()
            }
            try #require(status == 0, "pg-cluster \(arguments) failed with \(status)")
        }

        func environment(_ directory: String) throws -> (host: String, port: String) {
            let lines = try String(contentsOfFile: "\(directory)/env", encoding: .utf8).split(separator: "\n")
            let value = { (key: String) in lines.first { $0.hasPrefix("\(key)=") }.map { String($0.dropFirst(key.count + 1)) } ?? "" }
            return (value("PGHOST"), value("PGPORT"))
        }

        func codes(_ lines: [Substring]) -> [String] {
            lines.compactMap { try? Event(payload: String($0)) }.compactMap { $0.row?["short_code"]?.stringValue }
        }

        @Test func everyConnectionFollowsAFailoverToThePromotedStandby() async throws {
            let root = FileManager.default.temporaryDirectory.appending(path: "pgherald-failover-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            chmod(root, 0o755)
            try await cluster("start '\(root)/primary' --fast")
            try await cluster("standby '\(root)/primary' '\(root)/standby'")
            defer {
                _ = system("'\(TestDatabase.repositoryRoot.path)/scripts/pg-cluster' stop '\(root)/standby' >/dev/null 2>&1")
                _ = system("'\(TestDatabase.repositoryRoot.path)/scripts/pg-cluster' stop '\(root)/primary' >/dev/null 2>&1")
                try? FileManager.default.removeItem(atPath: root)
            }
            let primary = try environment("\(root)/primary")
            let standby = try environment("\(root)/standby")
            let admin = try LibpqConnection.connect(ConnectionString("host=\(primary.host) port=\(primary.port) user=postgres dbname=postgres"))
            try admin.execute("CREATE DATABASE failover")
            let database = TestDatabase(
                name: "failover",
                connInfo: "host=\(primary.host),\(standby.host) port=\(primary.port),\(standby.port) user=postgres dbname=failover target_session_attrs=read-write"
            )
            let setup = try database.connect()
            try setup.execute(String(contentsOf: TestDatabase.repositoryRoot.appending(path: "sql/examples/enrolment.sql"), encoding: .utf8))
            try Installer.install(on: setup)

            // No in-memory history, so resumes read the journal over the journal connection.
            let daemon = try await SocketDaemon(database: database, arguments: ["--history", "0"])
            let live = try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson&table=course")
            for code in ["A", "B", "C"] {
                try database.execute("INSERT INTO course (short_code, name) VALUES ($1, 'before')", parameters: [code])
            }
            try await live.waitForLines(3)
            let first = try #require(live.lines.first.flatMap { try? Event(payload: String($0)) })
            let warm = try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson&table=course&since=\(first.id)")
            try await warm.waitForLines(2)
            #expect(try await daemon.get("/stats").status == 200)

            // Everything committed has reached the standby; then the primary dies and the standby takes over.
            // The insert position, not the write position: with synchronous_commit off (--fast) a commit
            // record can wait in WAL buffers past pg_current_wal_lsn(), and dies with the primary.
            let standbyAdmin = try LibpqConnection.connect(ConnectionString("host=\(standby.host) port=\(standby.port) user=postgres dbname=postgres"))
            let target = try #require(try admin.execute("SELECT pg_current_wal_insert_lsn()::text").rows.first?[0] ?? nil)
            try await waitFor {
                try standbyAdmin.execute("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", parameters: [target]).rows.first?[0] == "t"
            } failure: { "the standby did not replay up to \(target)" }
            try await cluster("kill '\(root)/primary'")
            try await cluster("promote '\(root)/standby'")

            try await daemon.waitUntilHealthy(within: 60)
            try database.execute("INSERT INTO course (short_code, name) VALUES ('D', 'after')")
            try await live.waitForLines(4)
            #expect(codes(live.lines) == ["A", "B", "C", "D"], "the listener follows")

            let resumed = try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson&table=course&since=\(first.id)")
            let text = try await resumed.text { $0.split(separator: "\n").count >= 3 }
            #expect(!text.contains("reset"), "the journal reader follows: \(text)")
            #expect(codes(resumed.lines) == ["B", "C", "D"])

            try database.execute("CREATE TABLE after_failover (id int PRIMARY KEY)")
            // The catalog follows: a table created on the new primary can be subscribed to (anything but 200 fails here).
            _ = try await RawStream(socketPath: daemon.socketPath, path: "/events?table=after_failover&format=ndjson")
            try await Task.sleep(for: .seconds(2.1))
            let journal = try #require(try await daemon.statistics().journal)
            #expect(journal.rows >= 4, "maintenance measures the new primary's journal")
            _ = try await daemon.stop()
        }
    }
}
