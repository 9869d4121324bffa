import Foundation
import Testing

extension IntegrationTests {
    /// The socket file: permissions, stale files from a crash, and a live daemon's socket.
    @Suite
    struct SocketFileTests {
        func status(_ path: String) throws -> stat {
            var info = stat()
            try #require(lstat(path, &info) == 0)
            return info
        }

        @Test func socketIsCreated0660AndRemovedOnShutdown() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database)
            let info = try status(daemon.socketPath)
            #expect(info.st_mode & S_IFMT == S_IFSOCK)
            #expect(info.st_mode & 0o777 == 0o660)
            let result = try await daemon.stop()
            #expect(result.status == 0, "\(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
        }

        @Test func modeAndGroupAreConfigurable() async throws {
            let database = try TestDatabase.create()
            let group = try #require(getgrnam("daemon"), "the test expects the standard 'daemon' group")
            let daemon = try await SocketDaemon(database: database, arguments: ["--socket-mode", "600", "--socket-group", "daemon"])
            let info = try status(daemon.socketPath)
            #expect(info.st_mode & 0o777 == 0o600)
            #expect(info.st_gid == group.pointee.gr_gid)
        }

        @Test func badModeOrGroupIsRefusedAtStart() async throws {
            let database = try TestDatabase.create()
            let path = SocketDaemon.temporarySocketPath()
            let badMode = try await DaemonProcess(["serve", "--db", database.connInfo, "--socket", path, "--socket-mode", "999"]).finish()
            #expect(badMode.status == 78)
            #expect(badMode.stderr.contains("socket.mode (--socket-mode): '999' is not octal permissions"))
            let badGroup = try await DaemonProcess(["serve", "--db", database.connInfo, "--socket", path, "--socket-group", "no-such-group-xyz"]).finish()
            #expect(badGroup.status == 78)
            #expect(badGroup.stderr.contains("socket.group (--socket-group): no group named 'no-such-group-xyz'"))
        }

        @Test func staleSocketFromACrashIsReplaced() async throws {
            let database = try TestDatabase.create()
            let path = SocketDaemon.temporarySocketPath()
            // A bound socket whose process is gone: the file stays, nobody accepts.
            let descriptor = try Self.bindUnixSocket(path, listening: false)
            close(descriptor)
            #expect(FileManager.default.fileExists(atPath: path))
            let daemon = try await SocketDaemon(database: database, socketPath: path)
            #expect(try await daemon.statistics().listener.state == "listening")
            let result = try await daemon.stop()
            #expect(result.stderr.contains("replaced a stale socket file"))
        }

        @Test func liveSocketIsNeverTakenOver() async throws {
            let database = try TestDatabase.create()
            let first = try await SocketDaemon(database: database)
            // Under another name: one name runs once per database.
            let second = try await DaemonProcess(["serve", "--db", database.connInfo, "--name", "second", "--socket", first.socketPath]).finish()
            #expect(second.status != 0)
            #expect(second.stderr.contains("Error: socket.path \(first.socketPath): another process serves it"), "\(second.stderr)")
            // The first daemon still serves its socket.
            #expect(try await first.get("/healthz").status == 200)
        }

        @Test func somethingElseAtThePathIsLeftAlone() async throws {
            let database = try TestDatabase.create()
            let path = SocketDaemon.temporarySocketPath()
            try "precious".write(toFile: path, atomically: true, encoding: .utf8)
            let result = try await DaemonProcess(["serve", "--db", database.connInfo, "--socket", path]).finish()
            #expect(result.status != 0)
            #expect(result.stderr.contains("exists and is not a socket"))
            #expect(try String(contentsOfFile: path, encoding: .utf8) == "precious")
        }

        static func bindUnixSocket(_ path: String, listening: Bool) throws -> Int32 {
            let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            let bound = withUnixSocketAddress(path) { bind(descriptor, $0, $1) }
            try #require(bound == 0, "bind failed: errno \(errno)")
            if listening { listen(descriptor, 8) }
            return descriptor
        }
    }
}
