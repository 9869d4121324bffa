import Foundation
import Synchronization

/// curl on the daemon's socket as another user: `setpriv` gives the process
/// the uid and groups, so the daemon reads them back with `SO_PEERCRED`.
/// The ids need no entry in /etc/passwd.
struct PeerClient {
    var userID: UInt32
    var groupID: UInt32
    var socketPath: String

    private func process(_ curl: [String]) throws -> DaemonProcess {
        try DaemonProcess(
            ["--reuid=\(userID)", "--regid=\(groupID)", "--clear-groups", "--", "curl", "-s", "--unix-socket", socketPath] + curl,
            executable: URL(fileURLWithPath: "/usr/bin/setpriv")
        )
    }

    /// GET (or `method`) a small document: the status and the body.
    func get(_ path: String, method: String = "GET") async throws -> (status: Int, body: String) {
        let result = try await process(["-X", method, "-w", "\n%{http_code}", "http://localhost\(path)"]).finish(within: 10)
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
    }

    /// Opens an event stream and collects what arrives.
    func stream(_ path: String = "/events") throws -> PeerStream {
        try PeerStream(process: process(["-N", "http://localhost\(path)"]))
    }
}

/// Everything a streaming curl has printed so far.
final class PeerStream: Sendable {
    let process: DaemonProcess
    private let received = Mutex("")
    private let ended = Mutex(false)

    init(process: DaemonProcess) {
        self.process = process
        let handle = process.stdout.fileHandleForReading
        Thread.detachNewThread { [self] in
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                received.withLock { $0 += String(decoding: chunk, as: UTF8.self) }
            }
            ended.withLock { $0 = true }
        }
    }

    var text: String { received.withLock { $0 } }
    var hasEnded: Bool { ended.withLock { $0 } }

    /// Waits until what arrived satisfies `predicate`.
    @discardableResult
    func wait(within seconds: Double = 10, until predicate: (String) -> Bool) async throws -> String {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            let text = self.text
            if predicate(text) { return text }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ProcessTimeout(description: "the stream did not get there within \(seconds) s; it has: \(text.suffix(2000))")
    }
}
