import Foundation
import Testing

/// A throwaway `nats-server -js` on 127.0.0.1, its store in a temporary
/// directory that outlives a kill, so a restart finds its streams again.
final class NATSServer: @unchecked Sendable {
    // @unchecked: `process` is replaced only by `restart()`, which the test calls from one task.
    static var executable: String? { ProcessInfo.processInfo.environment["PGHERALD_TEST_NATS_SERVER"] }
    static var python: String? { ProcessInfo.processInfo.environment["PGHERALD_TEST_NATS_PYTHON"] }

    let port = freeLoopbackPort()
    let store = FileManager.default.temporaryDirectory.appending(path: "pgherald-nats-\(UUID().uuidString.prefix(8))").path
    let credentials: (user: String, password: String)?
    let extraArguments: [String]
    private var process: Process

    var url: String { "nats://127.0.0.1:\(port)" }

    init(credentials: (user: String, password: String)? = nil, extraArguments: [String] = []) async throws {
        self.credentials = credentials
        self.extraArguments = extraArguments
        process = Process()
        try await start()
    }

    deinit {
        process.terminate()
        try? FileManager.default.removeItem(atPath: store)
    }

    private func start() async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(Self.executable))
        var arguments = ["-js", "-a", "127.0.0.1", "-p", String(port), "-sd", store]
        if let credentials { arguments += ["--user", credentials.user, "--pass", credentials.password] }
        arguments += extraArguments
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        try await waitFor(seconds: 15) { Self.accepts(port: port) }
    }

    /// Kills the server with SIGKILL, as a crash would.
    func kill() {
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    func restart() async throws {
        try await start()
    }

    /// Every message of `stream`, read with nats-py, signing in with `authentication` (`--nkey FILE` or `--creds FILE`).
    func messages(of stream: String, authentication: [String] = []) async throws -> [StreamMessage] {
        let reader = Process()
        reader.executableURL = URL(fileURLWithPath: try #require(Self.python))
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appending(path: "tests/nats/read_stream.py").path
        reader.arguments = [script, url, stream] + authentication
        let output = Pipe()
        reader.standardOutput = output
        try reader.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        reader.waitUntilExit()
        return try String(decoding: data, as: UTF8.self).split(separator: "\n").map {
            try JSONDecoder().decode(StreamMessage.self, from: Data($0.utf8))
        }
    }

    struct StreamMessage: Decodable {
        var seq: Int
        var subject: String
        var msg_id: String?
        var count: String?
        var data: String
    }

    private static func accepts(port: Int) -> Bool {
        guard let descriptor = connectedSocket(port: port) else { return false }
        close(descriptor)
        return true
    }

    /// A socket connected to 127.0.0.1:`port`, which the caller closes; nil when nothing accepts there.
    static func connectedSocket(port: Int) -> Int32? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else {
            close(descriptor)
            return nil
        }
        return descriptor
    }
}
