import Synchronization
import AsyncHTTPClient
import Foundation
import Herald
import HeraldClient
import NIOCore
import NIOHTTP1
import NIOFoundationCompat
import Testing

/// A `pgherald serve` process with its socket in a temporary directory.
final class SocketDaemon: Sendable {
    let database: TestDatabase
    let socketPath: String
    let process: DaemonProcess

    /// Starts the daemon and waits until `/healthz` says it is listening.
    init(database: TestDatabase, socketPath: String? = nil, arguments: [String] = [], environment: [String: String] = [:]) async throws {
        self.database = database
        self.socketPath = socketPath ?? Self.temporarySocketPath()
        process = try DaemonProcess(
            ["serve", "--db", database.connInfo, "--socket", self.socketPath, "--log-format", "json"] + arguments,
            environment: environment
        )
        try await waitUntilHealthy()
    }

    static func temporarySocketPath() -> String {
        let directory = FileManager.default.temporaryDirectory.appending(path: "pgherald-\(UUID().uuidString.prefix(8))")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory.appending(path: "pgherald.sock").path
    }

    func waitUntilHealthy(within seconds: Double = 20) async throws {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if let (status, _) = try? await get("/healthz"), status == 200 { return }
            guard process.process.isRunning else {
                let result = try await process.finish()
                throw ProcessTimeout(description: "daemon exited with \(result.status): \(result.stderr)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw ProcessTimeout(description: "daemon not healthy within \(seconds) s")
    }

    var client: HeraldClient { HeraldClient(socketPath: socketPath) }

    /// GET a small document from the daemon.
    func get(_ path: String, headers: [(String, String)] = []) async throws -> (status: UInt, body: String) {
        try await Self.get(path, headers: headers, socketPath: socketPath)
    }

    /// GET a small document from the daemon serving `socketPath`, ready or not.
    static func get(_ path: String, headers: [(String, String)] = [], socketPath: String) async throws -> (status: UInt, body: String) {
        var request = HTTPClientRequest(url: URL(httpURLWithSocketPath: socketPath, uri: path)!.absoluteString)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await TestHTTP.client.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 1 << 20)
        return (response.status.code, String(buffer: body))
    }

    func statistics() async throws -> DaemonStatistics {
        try await client.statistics()
    }

    /// Waits until the daemon reports `count` subscribers of `kind`.
    func waitForSubscribers(_ count: Int, kind: String, within seconds: Double = 20) async throws {
        try await waitFor(seconds: seconds) {
            try await statistics().subscribers[kind, default: 0] == count
        } failure: { "expected \(count) \(kind) subscribers" }
    }

    /// Resident memory of the daemon, in bytes.
    var residentBytes: Int {
        let status = (try? String(contentsOfFile: "/proc/\(process.process.processIdentifier)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }

    /// Sends SIGTERM and waits for the exit, killing the daemon after `seconds`.
    func stop(within seconds: Double = 20) async throws -> (status: Int32, stdout: String, stderr: String) {
        process.signal(SIGTERM)
        return try await process.finish(within: seconds)
    }
}

enum TestHTTP {
    /// Enough connections for the 1000-subscriber test; reads never time out.
    static let client = HTTPClient(
        eventLoopGroupProvider: .singleton,
        configuration: HTTPClient.Configuration(
            timeout: .init(connect: .seconds(10)),
            connectionPool: .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 2000)
        )
    )
}

/// A raw `GET /events` that reads the response as it arrives, for checking framing byte by byte.
final class RawStream: Sendable {
    private let task: Task<Void, Never>
    private let receivedBytes = ReceivedBytes()

    convenience init(socketPath: String, path: String, headers: [(String, String)] = []) async throws {
        try await self.init(url: URL(httpURLWithSocketPath: socketPath, uri: path)!.absoluteString, headers: headers, client: TestHTTP.client)
    }

    /// A stream from any address, such as the network listener's over HTTPS.
    init(url: String, headers: [(String, String)] = [], client: HTTPClient) async throws {
        var request = HTTPClientRequest(url: url)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await client.execute(request, deadline: .distantFuture)
        try #require(response.status == .ok, "GET \(url) answered \(response.status)")
        version = response.version
        contentType = response.headers.first(name: "content-type") ?? ""
        let received = self.receivedBytes
        task = Task {
            do {
                for try await chunk in response.body { received.append(chunk) }
            } catch {}
            received.finish()
        }
    }

    let contentType: String
    /// The HTTP version the response came over.
    let version: HTTPVersion

    deinit { task.cancel() }

    /// Waits until the text received so far satisfies `condition`, then returns it.
    func text(within seconds: Double = 10, until condition: @escaping @Sendable (String) -> Bool) async throws -> String {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while true {
            let text = receivedBytes.text
            if condition(text) { return text }
            guard ContinuousClock.now < deadline else {
                throw ProcessTimeout(description: "stream did not deliver in time; have \(text.suffix(300))")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    var isFinished: Bool { receivedBytes.isFinished }

    /// What has arrived so far.
    var received: String { receivedBytes.text }

    /// Waits until at least `count` lines have arrived.
    func waitForLines(_ count: Int, within seconds: Double = 30) async throws {
        try await waitFor(seconds: seconds) {
            receivedBytes.lineCount >= count
        } failure: { "expected \(count) lines, have \(receivedBytes.lineCount)" }
    }

    var lines: [Substring] { receivedBytes.text.split(separator: "\n") }
}

final class ReceivedBytes: Sendable {
    private let state = Mutex((bytes: [UInt8](), lines: 0, finished: false))
    func append(_ buffer: ByteBuffer) {
        buffer.withUnsafeReadableBytes { raw in
            // memchr, not a byte loop: the tests run unoptimised.
            var lines = 0
            if var cursor = raw.baseAddress {
                var remaining = raw.count
                while remaining > 0, let found = memchr(cursor, Int32(UInt8(ascii: "\n")), remaining) {
                    lines += 1
                    let next = UnsafeRawPointer(found) + 1
                    remaining -= next - cursor
                    cursor = next
                }
            }
            state.withLock {
                $0.bytes.append(contentsOf: raw)
                $0.lines += lines
            }
        }
    }
    func finish() { state.withLock { $0.finished = true } }
    var lineCount: Int { state.withLock { $0.lines } }
    var text: String { state.withLock { String(decoding: $0.bytes, as: UTF8.self) } }
    var isFinished: Bool { state.withLock { $0.finished } }
}

/// A client that connects to the socket, asks for events and never reads a byte.
final class StalledClient {
    let descriptor: Int32

    init(socketPath: String, path: String = "/events") throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var small: Int32 = 4096
        setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        let connected = withUnixSocketAddress(socketPath) { connect(descriptor, $0, $1) }
        try #require(connected == 0, "connect failed: errno \(errno)")
        let request = Array("GET \(path) HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    }

    /// Whether the daemon has closed the connection, without reading a byte:
    /// a client that read while it waited would be a slow reader, which the daemon keeps.
    var isHungUpByPeer: Bool {
        // POLLRDHUP, which Glibc's module leaves out (it needs _GNU_SOURCE).
        let peerHungUp: Int16 = 0x2000
        var descriptors = pollfd(fd: descriptor, events: peerHungUp, revents: 0)
        return poll(&descriptors, 1, 0) == 1 && descriptors.revents & (peerHungUp | Int16(POLLHUP)) != 0
    }

    /// Everything ``readSlowly(untilBodyContains:chunk:pause:within:)`` has read so far.
    private var received: [UInt8] = []

    /// Reads `chunk` bytes at a time with `pause` between reads, until the
    /// body (HTTP chunking taken off) holds `marker`, or the daemon closes the
    /// connection (or `seconds` pass). Returns the whole body read so far and whether the daemon closed it.
    func readSlowly(
        untilBodyContains marker: String, chunk: Int = 4096, pause: Duration = .milliseconds(10), within seconds: Int = 30
    ) async throws -> (body: String, closedByPeer: Bool) {
        // Waits for data as long as the whole read may take: under load, a 100,000-row statement's
        // first event came more than 5 s after its commit, and a 5 s wait ended the read with nothing.
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let deadline = ContinuousClock.now + .seconds(seconds)
        var buffer = [UInt8](repeating: 0, count: chunk)
        var seen = false
        while ContinuousClock.now < deadline {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            guard count > 0 else { return (Self.body(of: received), count == 0) }
            received += buffer[0..<count]
            // Seen in the newest bytes first (a frame may straddle two reads), then in
            // whole chunks only, since its line may still be arriving: the body is decoded rarely.
            let recent = String(decoding: received.suffix(count + marker.utf8.count), as: UTF8.self)
            if seen || recent.contains(marker) {
                seen = true
                let body = Self.body(of: received)
                if body.contains(marker) { return (body, false) }
            }
            try await Task.sleep(for: pause)
        }
        return (Self.body(of: received), false)
    }

    /// The body of a chunked HTTP/1.1 response, as far as it has arrived.
    static func body(of response: [UInt8]) -> String {
        let text = String(decoding: response, as: UTF8.self)
        guard let headEnd = text.range(of: "\r\n\r\n") else { return "" }
        var rest = text[headEnd.upperBound...].utf8[...]
        var body: [UInt8] = []
        while let lineEnd = rest.firstRange(of: "\r\n".utf8) {
            guard let size = Int(String(decoding: rest[..<lineEnd.lowerBound], as: UTF8.self), radix: 16), size > 0 else { break }
            let start = lineEnd.upperBound
            guard let end = rest.index(start, offsetBy: size, limitedBy: rest.endIndex) else { break }
            body += rest[start..<end]
            guard let next = rest.index(end, offsetBy: 2, limitedBy: rest.endIndex) else { break }
            rest = rest[next...]
        }
        return String(decoding: body, as: UTF8.self)
    }

    deinit { close(descriptor) }
}
