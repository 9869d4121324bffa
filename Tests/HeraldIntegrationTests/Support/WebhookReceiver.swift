import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// A real HTTP server on 127.0.0.1 that records every webhook request and
/// answers as the test says: a status per attempt, a delay, or never.
final class WebhookReceiver: Sendable {
    struct Request: Sendable {
        var path: String
        var headers: [String: String]
        var body: [UInt8]
        var at: ContinuousClock.Instant
        var id: String { headers["webhook-id"] ?? "" }
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    /// What to answer: a status (with headers), or hang until the server stops.
    enum Answer: Sendable {
        case status(Int, headers: [String: String] = [:])
        case hang
    }

    typealias Script = @Sendable (_ request: Request, _ attempt: Int) async -> Answer

    private struct State {
        var requests: [Request] = []
        var script: Script = { _, _ in .status(200) }
        var server: Task<Void, Never>?
        var port = 0
    }

    private let state = Mutex(State())

    init(port: Int = 0) async throws {
        try await start(port: port)
    }

    var port: Int { state.withLock { $0.port } }
    func url(_ path: String = "/hook") -> String { "http://127.0.0.1:\(port)\(path)" }
    var requests: [Request] { state.withLock { $0.requests } }

    func answer(with script: @escaping Script) {
        state.withLock { $0.script = script }
    }

    /// Starts serving (again, on the same port after ``stop()``).
    func start(port: Int? = nil) async throws {
        let router = Router()
        router.post("**") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 16 << 20)
            var headers: [String: String] = [:]
            for field in request.headers { headers[field.name.canonicalName] = field.value }
            let recorded = Request(path: request.uri.path, headers: headers, body: Array(buffer: body), at: .now)
            let (script, attempt) = self.state.withLock { state -> (Script, Int) in
                state.requests.append(recorded)
                return (state.script, state.requests.filter { $0.id == recorded.id }.count)
            }
            switch await script(recorded, attempt) {
            case .status(let code, let extra):
                var fields = HTTPFields()
                for (name, value) in extra { fields[HTTPField.Name(name)!] = value }
                return Response(status: .init(code: code), headers: fields, body: .init(byteBuffer: ByteBuffer(string: "answer \(code)")))
            case .hang:
                try? await Task.sleep(for: .seconds(3600))
                return Response(status: .ok)
            }
        }
        let bound = AsyncStream<Int>.makeStream()
        let app = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: port ?? self.port)),
            onServerRunning: { channel in bound.continuation.yield(channel.localAddress?.port ?? 0) },
            logger: Logger(label: "webhook-receiver", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        let server = Task { _ = try? await app.runService() }
        var iterator = bound.stream.makeAsyncIterator()
        let port = await iterator.next() ?? 0
        state.withLock {
            $0.server = server
            $0.port = port
        }
    }

    /// Stops serving: new connections are refused until ``start(port:)``.
    func stop() async {
        let server = state.withLock { state in
            defer { state.server = nil }
            return state.server
        }
        server?.cancel()
        await server?.value
    }

    deinit {
        state.withLock { $0.server?.cancel() }
    }

    /// Waits until requests satisfy `condition`.
    @discardableResult
    func wait(within seconds: Double = 30, until condition: @Sendable ([Request]) -> Bool) async throws -> [Request] {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            let requests = self.requests
            if condition(requests) { return requests }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ProcessTimeout(description: "webhook receiver: condition not met within \(seconds) s; \(requests.count) requests: \(requests.suffix(5).map { "\($0.id)" })")
    }
}

/// Checks a `webhook-signature` as the Standard Webhooks specification
/// describes it, written from the spec and independent of pgherald's signer:
/// HMAC-SHA256 over `id.timestamp.body` with the base64 key after `whsec_`,
/// compared with each space-separated `v1,` signature.
enum StandardWebhooksVerifier {
    static func verify(_ request: WebhookReceiver.Request, secret: String, now: Date = Date()) -> Bool {
        guard let id = request.headers["webhook-id"], let timestamp = request.headers["webhook-timestamp"],
              let seconds = Double(timestamp), abs(now.timeIntervalSince1970 - seconds) < 300,
              let header = request.headers["webhook-signature"],
              let key = Data(base64Encoded: String(secret.dropFirst("whsec_".count))) else { return false }
        let signed = Data("\(id).\(timestamp).".utf8) + Data(request.body)
        let expected = Data(HMAC<SHA256>.authenticationCode(for: signed, using: SymmetricKey(data: key))).base64EncodedString()
        return header.split(separator: " ").contains { part in
            let pieces = part.split(separator: ",", maxSplits: 1)
            return pieces.count == 2 && pieces[0] == "v1" && pieces[1] == expected
        }
    }
}
