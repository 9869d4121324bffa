import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// Sends signed requests to one endpoint, on a connection pool of its own so
/// that a slow receiver only ever occupies its own connections.
final class WebhookSender: Sendable {
    /// Bytes of a response body kept for a dead letter.
    static let excerptLength = 512

    let endpoint: WebhookEndpoint
    private let client: HTTPClient
    /// The loop the dispatcher's tasks run on, so that a request and its answer stay on one thread.
    let eventLoop: any EventLoop
    private let signer: WebhookSigner
    private let userAgent: String

    init(endpoint: WebhookEndpoint, version: String) {
        self.endpoint = endpoint
        signer = WebhookSigner(secrets: endpoint.secrets)
        userAgent = "pgherald/\(version)"
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .init(endpoint.limits.timeout), read: .init(endpoint.limits.timeout))
        )
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = endpoint.effectiveConcurrency
        // The endpoint gate already backs off and probes. The client's own
        // connection retries back off too, up to a minute, and kept failing
        // probes with the last "connection refused" long after the receiver
        // was back (scripts/soak); so a failed connect fails the attempt.
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.decompression = .disabled
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        eventLoop = client.eventLoopGroup.next()
    }

    /// What came of one attempt, with the start of the response body.
    struct Attempt: Sendable {
        var outcome: DeliveryOutcome
        var excerpt: String?
    }

    func send(eventID: String, body: [UInt8], now: Date = Date()) async -> Attempt {
        let timestamp = Int64(now.timeIntervalSince1970)
        var request = HTTPClientRequest(url: endpoint.url)
        request.method = .POST
        for (name, value) in endpoint.headers { request.headers.replaceOrAdd(name: name, value: value) }
        request.headers.replaceOrAdd(name: "content-type", value: "application/json")
        request.headers.replaceOrAdd(name: "user-agent", value: userAgent)
        request.headers.replaceOrAdd(name: "webhook-id", value: eventID)
        request.headers.replaceOrAdd(name: "webhook-timestamp", value: String(timestamp))
        request.headers.replaceOrAdd(name: "webhook-signature", value: signer.signature(id: eventID, timestamp: timestamp, body: body))
        request.body = .bytes(ByteBuffer(bytes: body))
        let deadline = NIODeadline.now() + .nanoseconds(Int64(endpoint.limits.timeout / .nanoseconds(1)))
        do {
            let response = try await client.execute(request, deadline: deadline)
            var excerpt: [UInt8] = []
            // Read the whole answer so the connection can be reused; keep its start.
            for try await chunk in response.body where excerpt.count < Self.excerptLength {
                excerpt.append(contentsOf: chunk.readableBytesView.prefix(Self.excerptLength - excerpt.count))
            }
            let retryAfter = response.headers.first(name: "retry-after").flatMap { RetryAfter.parse($0, now: now) }
            return Attempt(
                outcome: .answer(status: Int(response.status.code), retryAfter: retryAfter),
                excerpt: excerpt.isEmpty ? nil : String(decoding: excerpt, as: UTF8.self)
            )
        } catch {
            return Attempt(outcome: .retryable(status: nil, error: Self.describe(error), retryAfter: nil))
        }
    }

    func shutdown() async {
        try? await client.shutdown()
    }

    private static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .connectTimeout: return "timed out"
            case .remoteConnectionClosed: return "the receiver closed the connection"
            default: return "\(error)"
            }
        }
        if let error = error as? ChannelError, case .connectTimeout = error { return "timed out connecting" }
        let text = "\(error)"
        if text.contains("connectionRefused") || text.contains("Connection refused") { return "connection refused" }
        return text
    }
}
