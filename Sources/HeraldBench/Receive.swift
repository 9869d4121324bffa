import ArgumentParser
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A webhook receiver that is not the bottleneck: an NIO HTTP server that
/// checks every request's Standard Webhooks signature and counts event ids.
struct Receive: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Receive pgherald's webhooks on 127.0.0.1, verifying and counting them.")

    @Option(help: "Port on 127.0.0.1.")
    var port: Int

    @Option(help: "The endpoint's secret (whsec_…), to verify signatures.")
    var secret: String

    @Flag(help: "Answer every request 503, as a failing receiver does.")
    var fail = false

    @Option(help: "Event-loop threads.")
    var threads: Int = 1

    @OptionGroup var run: RunOptions

    func run() async throws {
        guard secret.hasPrefix("whsec_"), let key = Data(base64Encoded: String(secret.dropFirst(6))) else {
            throw ValidationError("--secret must be whsec_ and base64")
        }
        let tally = ReceiverTally()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let status: HTTPResponseStatus = fail ? .serviceUnavailable : .ok
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(WebhookRequestHandler(key: SymmetricKey(data: key), status: status, tally: tally))
                }
            }
            .bind(host: "127.0.0.1", port: port).get()
        let (expected, readyCPU, readyWall) = try run.awaitCommittedCount()
        let deadline = nowMicroseconds() + Int64(run.wait * 1e6)
        while !fail, tally.state.withLock({ $0.ids.count }) < expected, nowMicroseconds() < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        let cpu = processCPUSeconds() - readyCPU
        let wall = Double(nowMicroseconds() - readyWall) / 1e6
        try await channel.close()
        let state = tally.state.withLock { $0 }
        try await group.shutdownGracefully()
        let sorted = state.record.latencies.sorted()
        let distinct = state.ids.count
        try LoadResult(
            scenario: run.scenario,
            label: run.label,
            subscribers: 1,
            expectedPerSubscriber: expected,
            received: distinct,
            deliveredRatio: expected == 0 ? 1 : Double(distinct) / Double(expected),
            missing: max(0, expected - distinct),
            duplicatedOrReordered: state.record.received - distinct,
            overflows: 0,
            resumes: 0,
            failedStreams: state.badSignatures,
            firstFailure: state.badSignatures > 0 ? "\(state.badSignatures) requests with a bad signature" : nil,
            latencyMilliseconds: LoadResult.Latency(sorted: sorted),
            latencyCDF: LoadResult.cdf(sorted: sorted),
            firstReceiptMicroseconds: state.record.received > 0 ? state.record.firstReceiptMicroseconds : nil,
            lastReceiptMicroseconds: state.record.received > 0 ? state.record.lastReceiptMicroseconds : nil,
            clientCPUSeconds: cpu,
            clientWallSeconds: wall,
            clientThreads: threads
        ).print()
    }
}

final class ReceiverTally: Sendable {
    struct State {
        var record = StreamRecord()
        var ids: Set<String> = []
        var badSignatures = 0
    }

    let state = Mutex(State())
}

/// One connection: collects each request, verifies it, answers.
final class WebhookRequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let key: SymmetricKey
    private let status: HTTPResponseStatus
    private let tally: ReceiverTally
    private var head: HTTPRequestHead?
    private var body: ByteBuffer?

    init(key: SymmetricKey, status: HTTPResponseStatus, tally: ReceiverTally) {
        self.key = key
        self.status = status
        self.tally = tally
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = context.channel.allocator.buffer(capacity: 512)
        case .body(var chunk):
            body?.writeBuffer(&chunk)
        case .end:
            guard let head, let body else { return }
            record(head, body)
            var headers = HTTPHeaders([("content-length", "0")])
            headers.add(name: "connection", value: head.isKeepAlive ? "keep-alive" : "close")
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
            let keepAlive = head.isKeepAlive
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
                if !keepAlive { context.close(promise: nil) }
            }
            self.head = nil
            self.body = nil
        }
    }

    private func record(_ head: HTTPRequestHead, _ body: ByteBuffer) {
        let now = nowMicroseconds()
        let id = head.headers.first(name: "webhook-id") ?? ""
        let timestamp = head.headers.first(name: "webhook-timestamp") ?? ""
        let signatures = head.headers.first(name: "webhook-signature") ?? ""
        var signed = Data("\(id).\(timestamp).".utf8)
        signed.append(contentsOf: body.readableBytesView)
        let expected = "v1," + Data(HMAC<SHA256>.authenticationCode(for: signed, using: key)).base64EncodedString()
        let valid = signatures.split(separator: " ").contains { $0 == expected }
        let at = body.withUnsafeReadableBytes { EventFields.timestamp(in: $0) }
        tally.state.withLock { state in
            if !valid { state.badSignatures += 1 }
            if state.ids.insert(id).inserted, let at {
                // Counts are not checked: webhook bodies carry 0, and delivery order is not promised.
                state.record.record(count: UInt64(state.ids.count), at: at, now: now)
            } else {
                state.record.received += 1
            }
        }
    }
}
