import Foundation

/// `openssl s_client` to 127.0.0.1, offering one protocol by ALPN: a TLS
/// client that sends what the test says when it says it, and ends when the
/// server closes the connection. Its standard input is a socket, so that a
/// send after it ended fails instead of raising SIGPIPE in the test.
final class TLSProbe {
    private let process = Process()
    private let output = Pipe()
    private let input: Int32
    let started = ContinuousClock.now

    init(port: Int, offering applicationProtocol: String, trusting caPath: String) throws {
        var pair: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0 else {
            throw ProcessTimeout(description: "cannot make a socket pair: errno \(errno)")
        }
        input = pair[0]
        let remote = FileHandle(fileDescriptor: pair[1], closeOnDealloc: true)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = [
            "s_client", "-connect", "127.0.0.1:\(port)", "-servername", "localhost", "-alpn", applicationProtocol, "-CAfile", caPath, "-nocommands",
        ]
        process.standardInput = remote
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        try remote.close()
    }

    deinit {
        if process.isRunning { process.terminate() }
        close(input)
    }

    /// Sends `bytes` to the server; false once the client has ended.
    func send(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { Glibc.send(input, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
    }

    /// Waits up to `seconds` for the client to end, as it does once the
    /// server closes the connection: how long after its start it ended, or
    /// nil when it still runs.
    func ended(within seconds: Double) async throws -> Duration? {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while process.isRunning {
            guard ContinuousClock.now < deadline else { return nil }
            try await Task.sleep(for: .milliseconds(20))
        }
        return ContinuousClock.now - started
    }

    /// What the client printed, once it ended (see ``ended(within:)``): the session, and the server's bytes.
    var printed: String {
        String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }
}
