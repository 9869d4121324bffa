import Foundation

/// A peer that says its piece and then never reads or answers: a frozen app,
/// a stalled network. A client connects and writes `request`; a server
/// listens on 127.0.0.1 and never accepts, so connections complete in the
/// kernel's backlog and whatever is sent to them waits there unread.
final class SilentPeer: Sendable {
    let descriptor: Int32
    /// The port a server listens on; 0 for a client.
    let port: Int

    /// Connects to 127.0.0.1:`port` and sends `request`.
    init(connectingTo port: Int, sending request: [UInt8]) throws {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        descriptor = try Self.connected(AF_INET, to: &address, length: MemoryLayout<sockaddr_in>.size)
        self.port = 0
        try send(request)
    }

    /// Connects to the Unix socket at `path` and sends `request`.
    init(connectingTo path: String, sending request: [UInt8]) throws {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8.prefix(raw.count - 1)) + [0])
        }
        descriptor = try Self.connected(AF_UNIX, to: &address, length: MemoryLayout<sockaddr_un>.size)
        port = 0
        try send(request)
    }

    /// Listens on a free loopback port and never accepts.
    init() throws {
        (descriptor, port) = try loopbackListener(backlog: 64)
    }

    deinit {
        close(descriptor)
    }

    private func send(_ bytes: [UInt8]) throws {
        let sent = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == bytes.count else { throw ProcessTimeout(description: "the silent peer could not send its request: errno \(errno)") }
    }

    private static func connected<Address>(_ family: Int32, to address: inout Address, length: Int) throws -> Int32 {
        let descriptor = socket(family, Int32(SOCK_STREAM.rawValue), 0)
        // Small buffers, so that what the daemon sends fills them soon.
        var size: Int32 = 4096
        setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(length)) }
        }
        guard connected == 0 else {
            close(descriptor)
            throw ProcessTimeout(description: "the silent peer cannot connect: errno \(errno)")
        }
        return descriptor
    }

    /// A WebSocket upgrade of `path`, and one masked text frame, as a client sends them.
    static func webSocket(path: String, text: String) -> [UInt8] {
        var bytes = Array((
            "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).utf8)
        let payload = Array(text.utf8)
        bytes.append(0x81)
        if payload.count < 126 {
            bytes.append(0x80 | UInt8(payload.count))
        } else {
            bytes += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        }
        let mask: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        bytes += mask
        bytes += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        return bytes
    }
}

extension SilentPeer {
    /// Reads what waited for it until nothing comes for `quietFor` seconds: the bytes, and whether the other side closed.
    func drain(quietFor seconds: Double) -> (bytes: Int, closed: Bool) {
        var total = 0
        let closed = receive(quietFor: seconds) { total += $0.count }
        return (total, closed)
    }

    /// What waited for it and came until nothing comes for `quietFor` seconds, and whether the other side closed.
    func read(quietFor seconds: Double) -> (bytes: [UInt8], closed: Bool) {
        var bytes: [UInt8] = []
        let closed = receive(quietFor: seconds) { bytes += $0 }
        return (bytes, closed)
    }

    private func receive(quietFor seconds: Double, _ body: (ArraySlice<UInt8>) -> Void) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(seconds * 1000)) > 0 else { return false }
            let read = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if read <= 0 { return true }
            body(buffer[..<read])
        }
    }
}
