#if canImport(Glibc)
import Glibc
#endif

/// Tells systemd how the service is doing, as sd_notify(3) does, over the
/// datagram socket named by `$NOTIFY_SOCKET`; without that variable every
/// message is dropped, so the daemon runs the same outside systemd.
public struct SystemdNotifier: Sendable {
    /// The socket, with a leading `@` for the abstract namespace; nil outside `Type=notify`.
    public let socketPath: String?

    public init(environment: [String: String]) {
        socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// How often systemd wants `WATCHDOG=1`: half of `WATCHDOG_USEC`, when
    /// the watchdog is on and meant for this process (`WATCHDOG_PID`).
    public static func watchdogInterval(environment: [String: String]) -> Duration? {
        guard let text = environment["WATCHDOG_USEC"], let microseconds = Int64(text), microseconds > 0 else { return nil }
        if let pid = environment["WATCHDOG_PID"].flatMap({ Int32($0) }), pid != getpid() { return nil }
        return .microseconds(microseconds) / 2
    }

    /// Sends newline-separated `KEY=value` assignments such as `READY=1\nSTATUS=listening`.
    /// Returns whether systemd (or whoever owns the socket) got them.
    @discardableResult
    public func send(_ assignments: String) -> Bool {
        guard let socketPath else { return false }
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(socketPath.utf8)
        // An abstract socket's name starts with a NUL instead of the "@" that stands for it.
        if pathBytes.first == UInt8(ascii: "@") { pathBytes[0] = 0 }
        guard pathBytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: pathBytes) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + pathBytes.count + (pathBytes.first == 0 ? 0 : 1))
        let message = Array(assignments.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                message.withUnsafeBytes { sendto(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), address, length) }
            }
        }
        return sent == message.count
    }
}
