import Foundation
@testable import HeraldService
import Testing

@Suite struct SystemdNotifierTests {
    @Test func messagesReachTheNotifySocket() throws {
        let path = FileManager.default.temporaryDirectory.appending(path: "notify-\(UUID().uuidString.prefix(8)).sock").path
        let receiver = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(receiver) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(receiver, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0)
        defer { unlink(path) }

        #expect(SystemdNotifier(environment: ["NOTIFY_SOCKET": path]).send("READY=1\nSTATUS=listening"))
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = recv(receiver, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        #expect(String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self) == "READY=1\nSTATUS=listening")
        #expect(!SystemdNotifier(environment: [:]).send("READY=1"))
    }

    @Test func theWatchdogIntervalIsHalfOfWhatSystemdAsks() {
        #expect(SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "30000000"]) == .seconds(15))
        #expect(SystemdNotifier.watchdogInterval(environment: ["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"]) == nil)
        #expect(SystemdNotifier.watchdogInterval(environment: [:]) == nil)
    }
}
