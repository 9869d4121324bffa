import Foundation
import Herald
import Testing

extension IntegrationTests {
    /// The `nats:` output against a real `nats-server -js`, the stream read back with nats-py.
    @Suite(.enabled(if: NATSServer.executable != nil && NATSServer.python != nil, "scripts/test provides nats-server and nats-py"))
    struct NATSOutputTests {
        func configuration(_ nats: NATSServer, _ extra: String = "", createStream: Bool = true) throws -> String {
            let path = FileManager.default.temporaryDirectory.appending(path: "pgherald-nats-\(UUID().uuidString.prefix(8)).yaml").path
            try """
            nats:
              servers: \(nats.url)
              stream: PGHERALD
              create_stream: \(createStream)
            \(extra)
            """.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }

        /// Writers commit while pgherald is killed and restarted, and while
        /// nats-server is killed and restarted: the stream then holds every
        /// committed event exactly once, in commit order.
        @Test func everyCommittedEventIsInTheStreamExactlyOnceThroughKills() async throws {
            let database = try TestDatabase.create()
            let nats = try await NATSServer()
            let config = try configuration(nats)
            var daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            try await waitFor { try await daemon.statistics().outputs?["nats"]?.health == "ok" }

            let writer = Task.detached {
                for round in 0..<240 {
                    try database.execute("INSERT INTO course (short_code, name) VALUES ($1, 'course')", parameters: ["N\(round)"])
                    try await Task.sleep(for: .milliseconds(10))
                }
            }
            try await Task.sleep(for: .milliseconds(600))
            daemon.process.signal(SIGKILL)
            _ = try await daemon.process.finish()
            daemon = try await SocketDaemon(database: database, socketPath: daemon.socketPath, arguments: ["--config", config])
            try await Task.sleep(for: .milliseconds(600))
            nats.kill()
            try await Task.sleep(for: .milliseconds(800))
            try await nats.restart()
            try await writer.value

            let committed = try database.execute("SELECT count(*) FROM course WHERE short_code LIKE 'N%'").rows.first?.first ?? nil
            #expect(committed == "240")
            try await waitFor(seconds: 60) {
                try await nats.messages(of: "PGHERALD").count >= 240
            } failure: { "the stream did not get every event" }
            let messages = try await nats.messages(of: "PGHERALD")
            let ids = messages.compactMap { $0.msg_id.flatMap { UInt64($0) } }
            #expect(messages.count == 240, "each event once")
            #expect(Set(ids).count == 240)
            #expect(ids == ids.sorted(), "one writer: commit order is id order")
            #expect(messages.allSatisfy { $0.subject == "pgherald.public.course.INSERT" })
            let event = try Event(payload: try #require(messages.first?.data))
            #expect(event.table.name == "course" && event.id == messages.first?.msg_id)
            // An idle output that loses NATS says so, and is healthy again once it reconnects, before any new event.
            nats.kill()
            try await waitFor(seconds: 30) { try await daemon.statistics().outputs?["nats"]?.health == "degraded" }
            try await nats.restart()
            try await waitFor(seconds: 60) { try await daemon.statistics().outputs?["nats"]?.health == "ok" }
            let stopped = try await daemon.stop()
            #expect(stopped.status == 0, "\(stopped.stderr)")
        }

        /// Bad credentials and a missing stream are named in `/stats` and the
        /// log while events wait in the journal; a subject that cannot be formed stops check-config.
        @Test func badCredentialsAMissingStreamAndABadSubjectSayWhy() async throws {
            let database = try TestDatabase.create()
            let guarded = try await NATSServer(credentials: ("herald", "right-password"))
            let passwordFile = FileManager.default.temporaryDirectory.appending(path: "pgherald-nats-pw-\(UUID().uuidString.prefix(8))").path
            try "wrong-password\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
            let refused = try await SocketDaemon(database: database, arguments: [
                "--config", try configuration(guarded, "  user: herald\n  password_file: \(passwordFile)"),
            ])
            try await waitFor { try await refused.statistics().outputs?["nats"]?.reason?.contains("Authorization") == true }
            let refusedStop = try await refused.stop()
            #expect(!refusedStop.stderr.contains("wrong-password"), "the password never appears")

            let open = try await NATSServer()
            let missing = try await SocketDaemon(database: database, arguments: ["--config", try configuration(open, createStream: false)])
            try await waitFor { try await missing.statistics().outputs?["nats"]?.reason?.contains("has no stream PGHERALD") == true }
            try database.execute("INSERT INTO course (short_code, name) VALUES ('WAITS', 'course')")
            #expect(try await missing.statistics().outputs?["nats"]?.delivered == 0)
            _ = try await missing.stop()

            let badSubject = try await DaemonProcess(["check-config", try configuration(open, "  subject: pgherald.{tabel}")]).finish()
            #expect(badSubject.status == 78)
            #expect(badSubject.stderr.contains("nats.subject") && badSubject.stderr.contains("{tabel} is not a placeholder"), "\(badSubject.stderr)")
        }
    

        /// NKey and JWT users, made with the `nkeys` Python package: pgherald signs
        /// the server's nonce with the seed from `nats.nkey_seed_file` or
        /// `nats.credentials_file`, and nats-py, signed in the same way, reads
        /// the stream; a seed the server does not know is refused with the reason.
        @Test func nkeyAndCredentialsFileUsersPublish() async throws {
            let directory = FileManager.default.temporaryDirectory.appending(path: "pgherald-nats-auth-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let script = TestDatabase.repositoryRoot.appending(path: "tests/nats/make_auth.py").path
            let made = try await DaemonProcess([script, directory], executable: URL(fileURLWithPath: try #require(NATSServer.python))).finish()
            try #require(made.status == 0, "\(made.stderr)")
            let strangerSeed = try String(contentsOfFile: "\(directory)/stranger.nk", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)

            let nkeyServer = try await NATSServer(extraArguments: ["-c", "\(directory)/nkey.conf"])
            let database = try TestDatabase.create()
            let stranger = try await SocketDaemon(database: database, arguments: [
                "--config", try configuration(nkeyServer, "  nkey_seed_file: \(directory)/stranger.nk"),
            ])
            try await waitFor { try await stranger.statistics().outputs?["nats"]?.reason?.contains("Authorization") == true }
            let strangerStop = try await stranger.stop()
            #expect(!strangerStop.stderr.contains(strangerSeed), "the seed never appears")

            let member = try await SocketDaemon(database: database, arguments: [
                "--config", try configuration(nkeyServer, "  nkey_seed_file: \(directory)/user.nk"),
            ])
            try await waitFor { try await member.statistics().outputs?["nats"]?.health == "ok" }
            for code in ["NK1", "NK2"] {
                try database.execute("INSERT INTO course (short_code, name) VALUES ($1, 'course')", parameters: [code])
            }
            try await waitFor { try await member.statistics().outputs?["nats"]?.delivered == 2 }
            let signed = try await nkeyServer.messages(of: "PGHERALD", authentication: ["--nkey", "\(directory)/user.nk"])
            #expect(try signed.map { try Event(payload: $0.data).new?["short_code"]?.stringValue } == ["NK1", "NK2"])
            _ = try await member.stop()

            let operatorServer = try await NATSServer(extraArguments: ["-c", "\(directory)/operator.conf"])
            let accountDatabase = try TestDatabase.create()
            let issued = try await SocketDaemon(database: accountDatabase, arguments: [
                "--config", try configuration(operatorServer, "  credentials_file: \(directory)/user.creds"),
            ])
            try await waitFor { try await issued.statistics().outputs?["nats"]?.health == "ok" }
            try accountDatabase.execute("INSERT INTO course (short_code, name) VALUES ('JWT1', 'course')")
            try await waitFor { try await issued.statistics().outputs?["nats"]?.delivered == 1 }
            let stored = try await operatorServer.messages(of: "PGHERALD", authentication: ["--creds", "\(directory)/user.creds"])
            #expect(try stored.map { try Event(payload: $0.data).new?["short_code"]?.stringValue } == ["JWT1"])
            let stopped = try await issued.stop()
            #expect(stopped.status == 0, "\(stopped.stderr)")

            let both = try await DaemonProcess(["check-config", try configuration(
                operatorServer, "  credentials_file: \(directory)/user.creds\n  nkey_seed_file: \(directory)/user.nk"
            )]).finish()
            #expect(both.status == 78)
            #expect(both.stderr.contains("use one way to authenticate"), "\(both.stderr)")
        }

        /// A server that requires TLS: refused with the reason without `tls`, and
        /// published to with `tls: true` and the private CA that signed its certificate.
        @Test func tlsWithAPrivateCertificateAuthority() async throws {
            let directory = FileManager.default.temporaryDirectory.appending(path: "pgherald-nats-tls-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let made = try await DaemonProcess(["/bin/sh", "-c", """
                cd '\(directory)' && printf 'subjectAltName=IP:127.0.0.1\\n' >san.cnf \\
                && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=pgherald-test-ca \\
                && openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1 \\
                && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 1 -extfile san.cnf
                """], executable: URL(fileURLWithPath: "/usr/bin/env")).finish()
            #expect(made.status == 0, "\(made.stderr)")
            let nats = try await NATSServer(extraArguments: ["--tls", "--tlscert", "\(directory)/server.pem", "--tlskey", "\(directory)/server.key"])
            let database = try TestDatabase.create()

            let plain = try await SocketDaemon(database: database, arguments: ["--config", try configuration(nats)])
            try await waitFor { try await plain.statistics().outputs?["nats"]?.reason?.contains("requires TLS") == true }
            _ = try await plain.stop()

            let secured = try await SocketDaemon(database: database, arguments: [
                "--config", try configuration(nats, "  tls: true\n  ca_file: \(directory)/ca.pem"),
            ])
            try await waitFor { try await secured.statistics().outputs?["nats"]?.health == "ok" }
            for code in ["TLS1", "TLS2", "TLS3"] {
                try database.execute("INSERT INTO course (short_code, name) VALUES ($1, 'course')", parameters: [code])
            }
            try await waitFor { try await secured.statistics().outputs?["nats"]?.delivered == 3 }
            let stopped = try await secured.stop()
            #expect(stopped.status == 0, "\(stopped.stderr)")
        }
    }
}
