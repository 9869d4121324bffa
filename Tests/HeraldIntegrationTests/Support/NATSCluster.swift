import Foundation
import Testing

/// Three `nats-server -js` nodes on 127.0.0.1 routed into one JetStream
/// cluster, each with its store in a temporary directory; any node can be
/// killed and started again.
final class NATSCluster: @unchecked Sendable {
    // @unchecked: `processes` changes only in `kill(_:)` and `restart(_:)`, which the test calls from one task.
    let clientPorts = (0..<3).map { _ in freeLoopbackPort() }
    let routePorts = (0..<3).map { _ in freeLoopbackPort() }
    let store = FileManager.default.temporaryDirectory.appending(path: "pgherald-natscluster-\(UUID().uuidString.prefix(8))").path
    private var processes: [Process?] = [nil, nil, nil]

    /// `nats://127.0.0.1:PORT` of each node.
    var urls: [String] { clientPorts.map { "nats://127.0.0.1:\($0)" } }

    init() async throws {
        for node in 0..<3 { try start(node) }
        try await waitFor(seconds: 20) { (0..<3).allSatisfy { Self.isReady(port: self.clientPorts[$0]) } }
    }

    deinit {
        for process in processes { process?.terminate() }
        try? FileManager.default.removeItem(atPath: store)
    }

    private func start(_ node: Int) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(NATSServer.executable))
        let routes = (0..<3).filter { $0 != node }.map { "nats://127.0.0.1:\(routePorts[$0])" }.joined(separator: ",")
        process.arguments = [
            "-js", "-a", "127.0.0.1", "-p", String(clientPorts[node]), "-sd", "\(store)/n\(node)", "--server_name", "n\(node)",
            "--cluster_name", "pgherald-test", "--cluster", "nats://127.0.0.1:\(routePorts[node])", "--routes", routes,
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        processes[node] = process
    }

    /// Kills `node` with SIGKILL, as a crash would.
    func kill(_ node: Int) {
        guard let process = processes[node] else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        processes[node] = nil
    }

    func restart(_ node: Int) async throws {
        try start(node)
        try await waitFor(seconds: 20) { Self.isReady(port: self.clientPorts[node]) }
    }

    /// The node's monitoring port is off; a client connection that gets `INFO` is ready enough.
    private static func isReady(port: Int) -> Bool {
        guard let descriptor = NATSServer.connectedSocket(port: port) else { return false }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 4)
        return recv(descriptor, &buffer, 4, 0) == 4 && buffer == Array("INFO".utf8)
    }
}
