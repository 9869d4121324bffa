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

@Suite struct DirectFrameTests {
    /// The three length forms of RFC 6455, unmasked, FIN and text opcode set.
    @Test(arguments: [(5, [0x81, 5]), (200, [0x81, 126, 0, 200]), (70_000, [0x81, 127, 0, 0, 0, 0, 0, 1, 0x11, 0x70])])
    func textFramesCarryTheirLength(size: Int, header: [UInt8]) {
        var buffer = ByteBuffer()
        DirectFrameWriter.appendTextFrame(Array(repeating: UInt8(ascii: "x"), count: size), to: &buffer)
        #expect(buffer.readBytes(length: header.count) == header)
        #expect(buffer.readableBytes == size)
    }
}

@Suite struct WriteTickerTests {
    /// Runs `body` on `loop`, as the stream tasks run.
    private func onLoop(_ loop: any EventLoop, _ body: @escaping @Sendable () async -> Void) async -> NIODeadline {
        await Task(executorPreference: EventLoopTaskExecutor(eventLoop: loop)) {
            await body()
            return NIODeadline.now()
        }.value
    }

    @Test func dueTimesRoundUpToTheGrid() {
        let grid = TimeAmount.milliseconds(5)
        #expect(WriteTicker.tick(for: .uptimeNanoseconds(10_000_000), grid: grid) == .uptimeNanoseconds(10_000_000))
        #expect(WriteTicker.tick(for: .uptimeNanoseconds(10_000_001), grid: grid) == .uptimeNanoseconds(15_000_000))
        #expect(WriteTicker.tick(for: .uptimeNanoseconds(14_999_999), grid: grid) == .uptimeNanoseconds(15_000_000))
    }

    @Test func noStreamReturnsBeforeItsGridLine() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let ticker = WriteTicker(eventLoop: loop)
        let grid = TimeAmount.milliseconds(50)
        let tick = WriteTicker.tick(for: .now() + .milliseconds(120), grid: grid)
        // Two dues on the same grid line share its tick; one on the next line waits for that.
        let near = tick - .milliseconds(30), onTheLine = tick, next = tick + .milliseconds(10)
        async let a = onLoop(loop) { await ticker.wait(until: near, grid: grid) }
        async let b = onLoop(loop) { await ticker.wait(until: onTheLine, grid: grid) }
        async let c = onLoop(loop) { await ticker.wait(until: next, grid: grid) }
        let (first, second, third) = await (a, b, c)
        #expect(first >= tick && second >= tick, "returned before the shared tick")
        #expect(third >= tick + grid, "returned before its own due's tick")
    }
}
