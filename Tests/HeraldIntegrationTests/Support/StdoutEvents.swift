import Foundation
import Herald
import Synchronization

/// Collects the events a `pgherald serve --stdout json` process prints, until it exits.
final class StdoutEvents: Sendable {
    private final class Printed: Sendable {
        let events = Mutex<[Event]>([])
    }

    private let printed = Printed()

    init(_ daemon: DaemonProcess) {
        let handle = daemon.stdout.fileHandleForReading
        let printed = self.printed
        // A thread of its own: the reads block, and blocking a cooperative
        // thread for each daemon would starve the tests on a 2-core machine.
        Thread {
            var buffer = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { return }
                buffer.append(chunk)
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                    buffer.removeSubrange(buffer.startIndex...newline)
                    if let event = try? Event(payload: line) {
                        printed.events.withLock { $0.append(event) }
                    }
                }
            }
        }.start()
    }

    var all: [Event] { printed.events.withLock { $0 } }

    /// Waits until at least `count` events have been printed, and returns them all.
    func wait(for count: Int, seconds: Double = 20) async throws -> [Event] {
        try await waitFor(seconds: seconds) { all.count >= count } failure: { "expected \(count) events, have \(all.count)" }
        return all
    }
}
