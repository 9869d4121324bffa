import AsyncHTTPClient
import Foundation
import NIOSSL
import Synchronization
import Testing

/// An `/events` NDJSON client that does what the docs ask of one: it
/// reconnects with `Last-Event-ID` whenever the daemon ends its stream
/// (`interrupted`, `overflow`), on an HTTP/1.1 connection of its own.
final class ResumingStream: Sendable {
    struct Received: Sendable {
        /// The `pk.id` of every row event, in the order they arrived.
        var ids: [Int] = []
        var sawHiddenColumn = false
        /// The last frames of the streams the daemon ended.
        var endings: [String] = []
        var connections = 0
        var lastEventID: String?
    }

    private final class Shared: Sendable {
        let state = Mutex((received: Received(), open: false))
    }

    private let shared = Shared()
    private let task: Task<Void, Never>
    private let client: HTTPClient

    /// Starts reading at once; `hiddenColumn` is a column name that must appear in no row.
    init(url: String, token: String, hiddenColumn: String = "secret") {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .none
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.httpVersion = .http1Only
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        self.client = client
        let shared = self.shared
        task = Task {
            while !Task.isCancelled {
                var request = HTTPClientRequest(url: url)
                request.headers.add(name: "Authorization", value: "Bearer \(token)")
                if let last = shared.state.withLock({ $0.received.lastEventID }) { request.headers.add(name: "Last-Event-ID", value: last) }
                do {
                    let response = try await client.execute(request, deadline: .distantFuture)
                    guard response.status == .ok else { throw HTTPClientError.invalidURL }
                    shared.state.withLock {
                        $0.open = true
                        $0.received.connections += 1
                    }
                    var pending: [UInt8] = []
                    for try await chunk in response.body {
                        pending.append(contentsOf: chunk.readableBytesView)
                        guard let lastNewline = pending.lastIndex(of: UInt8(ascii: "\n")) else { continue }
                        let complete = pending[...lastNewline]
                        pending.removeFirst(lastNewline + 1)
                        shared.state.withLock { Self.take(complete, into: &$0.received, hiddenColumn: hiddenColumn) }
                    }
                } catch {
                    try? await Task.sleep(for: .milliseconds(100))
                }
            }
        }
    }

    /// Parses complete NDJSON lines: each row event's id, its position, and every error frame.
    private static func take(_ bytes: ArraySlice<UInt8>, into received: inout Received, hiddenColumn: String) {
        for line in bytes.split(separator: UInt8(ascii: "\n")) {
            // Only the head is parsed: a row of 1 MB is matched, not decoded.
            let head = String(decoding: line.prefix(200), as: UTF8.self)
            if head.hasPrefix(#"{"error""#) {
                received.endings.append(String(decoding: line, as: UTF8.self))
                continue
            }
            guard let idRange = head.firstRange(of: #"{"id":""#), let pkRange = head.firstRange(of: #""pk":{"id":"#) else { continue }
            let eventID = head[idRange.upperBound...].prefix { $0 != "\"" }
            if let id = Int(head[pkRange.upperBound...].prefix { $0.isNumber }) { received.ids.append(id) }
            received.lastEventID = String(eventID)
            if line.count > 200, String(decoding: line.suffix(200), as: UTF8.self).contains("\"\(hiddenColumn)\"") { received.sawHiddenColumn = true }
            if head.contains("\"\(hiddenColumn)\"") { received.sawHiddenColumn = true }
        }
    }

    func waitUntilOpen(within seconds: Double = 10) async throws {
        try await waitFor(seconds: seconds) { self.shared.state.withLock { $0.open } }
    }

    /// Waits for `count` rows, and returns what arrived.
    func read(count: Int, within seconds: Double) async throws -> Received {
        try await waitFor(seconds: seconds) { self.shared.state.withLock { $0.received.ids.count >= count } } failure: {
            let received = self.shared.state.withLock { $0.received }
            return "\(received.ids.count) of \(count) rows over \(received.connections) connections; endings \(received.endings)"
        }
        try await Task.sleep(for: .milliseconds(300))
        return shared.state.withLock { $0.received }
    }

    func stop() async {
        task.cancel()
        try? await client.shutdown()
    }
}
