import Foundation
import Synchronization

/// A test-owned `NOTIFY_SOCKET`: collects what the daemon tells systemd, with arrival times.
final class NotifyReceiver: Sendable {
    let path: String
    private let descriptor: Int32
    private let inbox = Inbox()

    private final class Inbox: Sendable {
        let received = Mutex<[(at: ContinuousClock.Instant, message: String)]>([])
    }

    init() throws {
        path = FileManager.default.temporaryDirectory.appending(path: "notify-\(UUID().uuidString.prefix(8)).sock").path
        let receiving = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        descriptor = receiving
        let bound = withUnixSocketAddress(path) { bind(receiving, $0, $1) }
        guard bound == 0 else { throw ProcessTimeout(description: "cannot bind \(path): errno \(errno)") }
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(receiving, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let inbox = self.inbox
        // Reads on a thread of its own until the socket is closed.
        Thread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = recv(receiving, &buffer, buffer.count, 0)
                if count > 0 {
                    let message = String(decoding: buffer.prefix(count), as: UTF8.self)
                    inbox.received.withLock { $0.append((.now, message)) }
                } else if count == 0 || (errno != EAGAIN && errno != EINTR) {
                    return
                }
            }
        }.start()
    }

    deinit {
        shutdown(descriptor, Int32(SHUT_RDWR))
        close(descriptor)
        unlink(path)
    }

    var messages: [String] { inbox.received.withLock { $0.map(\.message) } }

    /// Arrival times of messages that contain `assignment` (such as `WATCHDOG=1`).
    func times(of assignment: String) -> [ContinuousClock.Instant] {
        inbox.received.withLock { $0.filter { $0.message.split(separator: "\n").contains(Substring(assignment)) }.map(\.at) }
    }

    /// Waits for a message containing `assignment` and returns the whole message.
    @discardableResult
    func waitFor(_ assignment: String, within seconds: Double = 20) async throws -> String {
        var found: String?
        try await HeraldIntegrationTests.waitFor(seconds: seconds) {
            found = messages.first { $0.split(separator: "\n").contains { $0.hasPrefix(assignment) } }
            return found != nil
        } failure: { "no \(assignment) among \(messages)" }
        return found!
    }
}
