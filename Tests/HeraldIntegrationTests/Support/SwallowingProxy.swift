import Foundation
import Synchronization

/// A TCP proxy on 127.0.0.1 in front of the cluster's Unix socket that can
/// start swallowing the traffic of the connections it has, in both
/// directions, without closing them: what a NAT or load balancer that
/// dropped a connection looks like from either end. Connections made after
/// that are relayed as usual.
final class SwallowingProxy: Sendable {
    let port: Int
    private let listening: Int32
    /// Connections at or below this number swallow their traffic.
    private let swallowedThrough = Atomic<Int>(0)
    private let accepted = Atomic<Int>(0)

    /// - Parameter socketPath: the cluster's `.s.PGSQL.PORT`.
    init(to socketPath: String) throws {
        let (descriptor, port) = try loopbackListener()
        self.port = port
        listening = descriptor
        Thread { [self] in
            while true {
                let client = accept(descriptor, nil, nil)
                guard client >= 0 else { return }
                let number = accepted.add(1, ordering: .relaxed).newValue
                let server = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
                guard withUnixSocketAddress(socketPath, { connect(server, $0, $1) }) == 0 else {
                    close(client)
                    close(server)
                    continue
                }
                relay(from: client, to: server, connection: number)
                relay(from: server, to: client, connection: number)
            }
        }.start()
    }

    /// Every connection open now swallows its traffic from here on.
    func swallowExistingConnections() {
        swallowedThrough.store(accepted.load(ordering: .relaxed), ordering: .relaxed)
    }

    private func relay(from source: Int32, to destination: Int32, connection: Int) {
        Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 16_384)
            while true {
                let count = read(source, &buffer, buffer.count)
                if count <= 0 { break }
                if connection <= swallowedThrough.load(ordering: .relaxed) { continue }
                var written = 0
                while written < count {
                    let step = buffer[written..<count].withUnsafeBytes { write(destination, $0.baseAddress, $0.count) }
                    if step <= 0 { break }
                    written += step
                }
            }
            shutdown(destination, Int32(SHUT_WR))
        }.start()
    }

    deinit {
        shutdown(listening, Int32(SHUT_RDWR))
        close(listening)
    }
}
