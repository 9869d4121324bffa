import Foundation

/// A TCP connection to 127.0.0.1 that a test drives a byte at a time, or
/// not at all, and that tells when the daemon closed it: a client that
/// holds a connection without doing its part.
final class RawConnection: Sendable {
    let descriptor: Int32
    let opened = ContinuousClock.now

    /// Connects to 127.0.0.1:`port` and sends nothing.
    init(port: Int) throws {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(descriptor)
            throw ProcessTimeout(description: "cannot connect to 127.0.0.1:\(port): errno \(errno)")
        }
        self.descriptor = descriptor
    }

    deinit {
        close(descriptor)
    }

    /// Sends `bytes`; false when the daemon has closed the connection.
    func send(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
    }

    /// Waits up to `seconds` for the daemon to close the connection,
    /// dropping what it sends meanwhile; how long after the connect it was
    /// closed, or nil when it is still open.
    func closed(within seconds: Double) async throws -> Duration? {
        let deadline = ContinuousClock.now + .seconds(seconds)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            var descriptors = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            if poll(&descriptors, 1, 0) > 0 {
                let read = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                if read == 0 || (read < 0 && errno != EAGAIN && errno != EWOULDBLOCK) { return ContinuousClock.now - opened }
                if read > 0 { continue }
            }
            guard ContinuousClock.now < deadline else { return nil }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}
