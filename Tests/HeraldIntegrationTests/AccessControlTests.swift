import Foundation
import Herald
import Testing

extension IntegrationTests {
    /// Access control on the socket by the peer's uid and groups, with
    /// clients run as other users.
    @Suite
    struct AccessControlTests {
        static let coursesOnly: UInt32 = 60001
        static let tenantGroup: UInt32 = 60100
        static let stranger: UInt32 = 60003

        static let rules = """
            socket:
              mode: "666"
            access:
              courses:
                user: \(coursesOnly)
                tables: [course]
              tenant7:
                group: \(tenantGroup)
                tables: [student]
                where: last_name.eq.T7

            """

        func configuration(_ text: String = rules) throws -> String {
            let directory = FileManager.default.temporaryDirectory.appending(path: "pgherald-access-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let path = directory.appending(path: "pgherald.yaml").path
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }

        func peer(_ user: UInt32, group: UInt32? = nil, on daemon: SocketDaemon) -> PeerClient {
            PeerClient(userID: user, groupID: group ?? user, socketPath: daemon.socketPath)
        }

        /// A checkout only root can read (a clone in root's home): another user cannot open a
        /// script in it, and gets the copy the tests share with other users instead.
        @Test func helpersForOtherUsersRunFromAPrivateCheckout() async throws {
            let folder = try #require(mkdtemp(strdup("\(NSTemporaryDirectory())/pgherald-private.XXXXXX")).map { String(cString: $0) })
            defer { try? FileManager.default.removeItem(atPath: folder) }
            #expect(chmod(folder, 0o700) == 0)
            let script = URL(fileURLWithPath: "\(folder)/whoami.sh")
            try "echo \"ran as $(id -u)\"\n".write(to: script, atomically: true, encoding: .utf8)
            func run(_ path: String) async throws -> (status: Int32, stdout: String, stderr: String) {
                let result = try await DaemonProcess(
                    ["--reuid=\(Self.coursesOnly)", "--regid=\(Self.coursesOnly)", "--clear-groups", "--", "/bin/sh", path],
                    executable: URL(fileURLWithPath: "/usr/bin/setpriv")
                ).finish(within: 10)
                return (result.status, result.stdout, result.stderr)
            }
            let inPlace = try await run(script.path)
            #expect(inPlace.status != 0 && inPlace.stderr.contains("Permission denied"), "\(inPlace)")
            let shared = try await run(try SharedWithOtherUsers.path(of: script))
            #expect(shared.status == 0 && shared.stdout == "ran as \(Self.coursesOnly)\n", "\(shared)")
        }

        /// Supabase Realtime on the socket without realtime keys: each peer's grant decides,
        /// with a standard-library client run as another user.
        @Test func realtimePeersOnTheSocketGetTheirGrant() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", configuration()])
            let script = try SharedWithOtherUsers.path(of: TestDatabase.repositoryRoot.appending(path: "tests/realtime/unix_peer.py"))
            func run(as user: UInt32) async throws -> [String] {
                let client = try DaemonProcess(
                    ["--reuid=\(user)", "--regid=\(user)", "--clear-groups", "--", "/usr/bin/python3", script, daemon.socketPath],
                    executable: URL(fileURLWithPath: "/usr/bin/setpriv"), withInput: true
                )
                _ = try await client.readLine(within: 20) { $0 == "JOINED" }
                try await Task.sleep(for: .milliseconds(300))
                try database.execute("INSERT INTO student (first_name, last_name) VALUES ('Hidden', 'X'); INSERT INTO course (short_code, name) VALUES ('C\(user)', 'Seen')")
                client.write(line: "go")
                let result = try await client.finish(within: 20)
                #expect(result.status == 0, "\(result.stderr)")
                return result.stdout.split(separator: "\n").map(String.init)
            }
            #expect(try await run(as: Self.coursesOnly) == ["SYSTEM ok", "course"])
            let stranger = try await run(as: Self.stranger)
            #expect(stranger.first == "SYSTEM error" && !stranger.contains("course") && !stranger.contains("student"), "\(stranger)")
            _ = try await daemon.stop()
        }

        @Test func aReloadRegrantsRealtimePeersOnTheSocketAndEndsThoseItShutsOut() async throws {
            let database = try TestDatabase.create()
            let path = try configuration()
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", path])
            let script = try SharedWithOtherUsers.path(of: TestDatabase.repositoryRoot.appending(path: "tests/realtime/unix_peer.py"))
            let client = try DaemonProcess(
                ["--reuid=\(Self.coursesOnly)", "--regid=\(Self.coursesOnly)", "--clear-groups", "--", "/usr/bin/python3", script, daemon.socketPath, "watch"],
                executable: URL(fileURLWithPath: "/usr/bin/setpriv"), withInput: true
            )
            _ = try await client.readLine(within: 20) { $0.hasPrefix("SYSTEM ok") }
            try database.execute("INSERT INTO course (short_code, name) VALUES ('RG1', 'Before')")
            _ = try await client.readLine(within: 10) { $0 == "course" }

            // The peer's grant moves from course to student: the channel follows it.
            try Self.rules.replacing("tables: [course]", with: "tables: [student]").write(toFile: path, atomically: true, encoding: .utf8)
            daemon.process.signal(SIGHUP)
            try await Task.sleep(for: .milliseconds(500))
            try database.execute("INSERT INTO course (short_code, name) VALUES ('RG2', 'Hidden now'); INSERT INTO student (first_name, last_name) VALUES ('Rae', 'G')")
            let next = try await client.readLine(within: 10) { $0 == "student" || $0 == "course" }
            #expect(next == "student", "a reload left the channel on its old grant")

            // No rule for the peer any more: the channel says why and closes.
            let withoutThePeer = "socket:\n  mode: \"666\"\naccess:\n  tenant7:\n    group: \(Self.tenantGroup)\n    tables: [student]\n"
            try withoutThePeer.write(toFile: path, atomically: true, encoding: .utf8)
            daemon.process.signal(SIGHUP)
            let ended = try await client.readLine(within: 10) { $0.hasPrefix("SYSTEM error") }
            #expect(ended.contains("access grant"), "\(ended)")
            // The client returns at once on phx_close; otherwise it would wait 30 s.
            let result = try await client.finish(within: 10)
            #expect(result.status == 0, "\(result.stderr)")
        }

        @Test func eachPeerGetsOnlyWhatItsGrantCovers() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", configuration()])
            let courses = peer(Self.coursesOnly, on: daemon)
            let tenant = peer(60002, group: Self.tenantGroup, on: daemon)

            // Outside the grant: 403 whether the table exists or not, and nothing subscribed.
            for path in ["/events?table=student", "/events?table=no_such_table", "/events?op=DELETE&table=course,student"] {
                let refused = try await courses.get(path)
                #expect(refused.status == 403, "\(path): \(refused.body)")
                #expect(refused.body.contains(#""error":"forbidden""#), "\(refused.body)")
            }
            let stranger = try await peer(Self.stranger, on: daemon).get("/events")
            #expect(stranger.status == 403 && stranger.body.contains("no access rule"), "\(stranger.body)")
            #expect(try await peer(Self.stranger, on: daemon).get("/healthz").status == 200)
            // pgherald tail (HeraldClient) gives up at once with the reason, rather than retrying.
            let tail = try await DaemonProcess(
                ["--reuid=\(Self.coursesOnly)", "--regid=\(Self.coursesOnly)", "--clear-groups", "--",
                 SharedWithOtherUsers.path(of: DaemonProcess.executable), "tail", "--socket", daemon.socketPath, "--table", "student"],
                executable: URL(fileURLWithPath: "/usr/bin/setpriv")
            ).finish(within: 10)
            #expect(tail.status != 0 && tail.stderr.contains("access rules refuse"), "\(tail.status): \(tail.stderr)")

            let wildcard = try courses.stream()
            let tenantStream = try tenant.stream("/events?format=ndjson")
            // Root, as the test runs, sees every event.
            let rootStream = EventCollector(daemon.client)
            try await Task.sleep(for: .milliseconds(500))
            try database.execute("INSERT INTO student (first_name, last_name) VALUES ('Ada', 'T7'), ('Bea', 'T8')")
            try database.execute("UPDATE student SET last_name = 'T7' WHERE first_name = 'Bea'")
            try database.execute("INSERT INTO course (short_code, name) VALUES ('SEC1', 'Security')")

            let seen = try await wildcard.wait { $0.contains("SEC1") }
            #expect(!seen.contains("Ada") && !seen.contains("Bea"), "\(seen)")
            let tenantSeen = try await tenantStream.wait { $0.contains("Ada") }
            try await Task.sleep(for: .milliseconds(300))
            // Bea's row moved from T8 to T7: its old values belong to T8, so the UPDATE is not shown either.
            #expect(!tenantStream.text.contains("Bea") && !tenantStream.text.contains("SEC1"), "\(tenantSeen)")
            #expect(try await rootStream.wait(for: 4).count == 4)

            // Per-table figures only for the tables the caller may see.
            let stats = try await courses.get("/stats")
            #expect(stats.status == 200 && stats.body.contains("public.course") && !stats.body.contains("public.student"), "\(stats.body)")
            let metrics = try await courses.get("/metrics")
            #expect(metrics.body.contains(#"table="course""#) && !metrics.body.contains(#"table="student""#))
            let rootStats = try await daemon.statistics()
            #expect(rootStats.tables.keys.contains("public.student"))
        }

        @Test func aJournalReplayIsNarrowedLikeTheLiveStream() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", configuration(Self.rules + "history: 0\n")])
            try database.execute("INSERT INTO course (short_code, name) VALUES ('OLD1', 'before')")
            let first = try database.execute("SELECT max(id)::text FROM pgherald.journal").rows.first?[0] ?? nil
            let since = try #require(first)
            try database.execute("INSERT INTO student (first_name, last_name) VALUES ('Cy', 'T9')")
            try database.execute("INSERT INTO course (short_code, name) VALUES ('OLD2', 'missed')")
            try await Task.sleep(for: .milliseconds(300))
            let resumed = try peer(Self.coursesOnly, on: daemon).stream("/events?since=\(since)")
            let text = try await resumed.wait { $0.contains("OLD2") }
            #expect(!text.contains("Cy") && !text.contains("OLD1"), "\(text)")
        }

        @Test func addingAnAccessSectionRevokesEveryStreamOpenedWithoutOne() async throws {
            let database = try TestDatabase.create()
            let path = try configuration("socket:\n  mode: \"666\"\n")
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", path])
            let open = try peer(Self.coursesOnly, on: daemon).stream()
            try await open.wait { $0.contains("retry:") }
            try Self.rules.write(toFile: path, atomically: true, encoding: .utf8)
            daemon.process.signal(SIGHUP)
            let ended = try await open.wait { $0.contains("event: revoked") }
            #expect(ended.contains("access rules now apply"), "\(ended)")
            #expect(try await peer(Self.coursesOnly, on: daemon).get("/events?table=student").status == 403)
        }

        @Test func aReloadRevokesStreamsWhoseGrantChangedAndKeepsTheOthers() async throws {
            let database = try TestDatabase.create()
            let path = try configuration()
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", path])
            let courses = try peer(Self.coursesOnly, on: daemon).stream()
            let tenant = try peer(60002, group: Self.tenantGroup, on: daemon).stream()
            try await courses.wait { $0.contains("retry:") }
            try await tenant.wait { $0.contains("retry:") }

            try Self.rules.replacing("tables: [course]", with: "tables: [enrols_in]").write(toFile: path, atomically: true, encoding: .utf8)
            daemon.process.signal(SIGHUP)
            let ended = try await courses.wait { $0.contains("event: revoked") }
            #expect(ended.contains("access grant"), "\(ended)")
            try await waitFor(seconds: 10) { courses.hasEnded }
            #expect(try await peer(Self.coursesOnly, on: daemon).get("/events?table=course").status == 403)

            try database.execute("INSERT INTO student (first_name, last_name) VALUES ('Dee', 'T7')")
            try await tenant.wait { $0.contains("Dee") }
            #expect(!tenant.text.contains("revoked"))
        }
    

        /// Live queries: granted by name, only with every table they read,
        /// and ended with `event: revoked` when a reload takes the grant away.
        @Test func liveQueriesAreGrantedByNameWithTheirTablesAndRevokedOnReload() async throws {
            let database = try TestDatabase.create()
            let withQueries = Self.rules
                .replacing("tables: [course]", with: "tables: [course]\n    queries: [course_*]")
                .replacing("where: last_name.eq.T7", with: "where: last_name.eq.T7\n    queries: [course_*]")
                + """
                queries:
                  course_names:
                    sql: select id, name from course
                    key: [id]
                  course_enrolments:
                    sql: select c.id, count(e.*) as enrolled from course c left join enrols_in e on e.course_id = c.id group by c.id
                    key: [id]

                """
            let path = try configuration(withQueries)
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", path])
            let names = try peer(Self.coursesOnly, on: daemon).stream("/queries/course_names")
            try await names.wait { $0.contains("event: result") }
            #expect(try await peer(Self.coursesOnly, on: daemon).get("/queries/course_enrolments").status == 403, "enrols_in is not granted")
            #expect(try await peer(60002, group: Self.tenantGroup, on: daemon).get("/queries/course_names").status == 403, "course is not granted")
            #expect(try await peer(Self.stranger, on: daemon).get("/queries/course_names").status == 403)

            try withQueries.replacing("queries: [course_*]\n  tenant7", with: "queries: [other]\n  tenant7")
                .write(toFile: path, atomically: true, encoding: .utf8)
            daemon.process.signal(SIGHUP)
            let ended = try await names.wait { $0.contains("event: revoked") }
            #expect(ended.contains("not granted"), "\(ended)")
            #expect(try await peer(Self.coursesOnly, on: daemon).get("/queries/course_names").status == 403)
        }
    }
}
