import Herald
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOPosix
import Testing
import HeraldWebhooks
@testable import HeraldServer

@Suite struct SocketWriteTests {
    @Test func writeSpacingGrowsWithTheOpenStreams() {
        let configuration = SocketConfiguration(path: "s", writeRate: 50_000)
        #expect(configuration.writeSpacing(openStreams: 1) == .microseconds(20))
        #expect(configuration.writeSpacing(openStreams: 100) == .milliseconds(2))
        #expect(configuration.writeSpacing(openStreams: 1000) == .milliseconds(20))
        #expect(SocketConfiguration(path: "s", writeRate: nil).writeSpacing(openStreams: 1000) == nil)
    }

    /// Stamped events, as the broker delivers them, and one replayed from the journal, which is not.
    @Test(arguments: StreamFormat.allCases, [true, false])
    func framesAreEachEventsBytesInOrderAndChunkedOnRequest(format: StreamFormat, stamped: Bool) {
        let events = stamped ? Broker().publish([makeEvent(1), makeEvent(2, operation: .update)]) : [makeEvent(3)]
        let body = switch format {
        case .sse: events.map { "id: \($0.id)\nevent: \($0.operation.rawValue)\ndata: \($0.jsonText)\n\n" }.joined()
        case .ndjson: events.map { $0.jsonText + "\n" }.joined()
        }
        #expect(String(buffer: format.frames(events, allocator: ByteBufferAllocator())) == body)
        let chunk = format.frames(events, allocator: ByteBufferAllocator(), asHTTPChunk: true)
        #expect(String(buffer: chunk) == String(body.utf8.count, radix: 16) + "\r\n" + body + "\r\n")
    }

    @Test func directWritesGoStraightUnderTheEncoder() throws {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(HTTPResponseEncoder())
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let writer = try #require(DirectChunkWriter(channel: channel))
        #expect(writer.canWrite)
        writer.write(ByteBuffer(string: "5\r\nhello\r\n"))
        let written = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(String(buffer: written) == "5\r\nhello\r\n")
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)

        _ = try channel.finish()
        #expect(!writer.canWrite, "a closed channel leaves the batch to the response writer")
    }

    @Test func noDirectWritesWithoutAnHTTP1Encoder() {
        #expect(DirectChunkWriter(channel: EmbeddedChannel()) == nil)
    }
}

@Suite struct WriteTickerTests {
    /// Runs `body` on `loop`, as the stream tasks run.
    private func onLoop<T: Sendable>(_ loop: any EventLoop, _ body: @escaping @Sendable () async -> T) async -> T {
        await Task(executorPreference: EventLoopTaskExecutor(eventLoop: loop)) { await body() }.value
    }

    @Test func streamsShareTicksAndNoneReturnsBeforeOne() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let ticker = WriteTicker(eventLoop: loop)
        let start = NIODeadline.now()
        let tick = start + .milliseconds(100)
        // The first waiter sets the tick; a later due joins it; an earlier due gets its own.
        async let first = onLoop(loop) { await ticker.wait(until: tick); return NIODeadline.now() }
        try await Task.sleep(for: .milliseconds(10))
        async let joining = onLoop(loop) { await ticker.wait(until: tick + .milliseconds(500)); return NIODeadline.now() }
        async let earlier = onLoop(loop) { await ticker.wait(until: start + .milliseconds(50)); return NIODeadline.now() }
        let (a, b, c) = await (first, joining, earlier)
        // The earlier due gets its own tick, and that tick releases every waiter then
        // waiting: none returns before the earliest tick, none after its own due.
        #expect(c >= start + .milliseconds(50) && c < tick, "the earlier due is not held to the pending tick")
        for returned in [a, b] {
            #expect(returned >= start + .milliseconds(50) && returned < tick + .milliseconds(50))
        }
    }
}
