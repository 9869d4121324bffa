import Herald
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing
@testable import HeraldServer

@Suite struct SocketWriteTests {
    @Test func writeSpacingGrowsWithTheOpenStreams() {
        let configuration = SocketConfiguration(path: "s", writeRate: 50_000)
        #expect(configuration.writeSpacing(openStreams: 1) == .microseconds(20))
        #expect(configuration.writeSpacing(openStreams: 100) == .milliseconds(2))
        #expect(configuration.writeSpacing(openStreams: 1000) == .milliseconds(20))
        #expect(SocketConfiguration(path: "s", writeRate: nil).writeSpacing(openStreams: 1000) == nil)
    }

    @Test(arguments: StreamFormat.allCases)
    func framesFillExactlyTheirByteCount(format: StreamFormat) {
        let events = Broker().publish([makeEvent(1), makeEvent(2, operation: .update)])
        let buffer = format.frames(events, allocator: ByteBufferAllocator())
        #expect(buffer.readableBytes == format.byteCount(of: events))
        let text = String(buffer: buffer)
        switch format {
        case .sse: #expect(text == events.map { String(decoding: $0.serverSentEventFrame, as: UTF8.self) }.joined())
        case .ndjson: #expect(text == events.map { $0.jsonText + "\n" }.joined())
        }
    }

    @Test func directWritesAreOneHTTPChunkEach() throws {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(HTTPResponseEncoder())
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let writer = try #require(DirectChunkWriter(channel: channel))
        let events = Broker().publish([makeEvent(1), makeEvent(2)])

        #expect(writer.write(events, as: .ndjson))
        let body = events.map { $0.jsonText + "\n" }.joined()
        let chunk = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(String(buffer: chunk) == String(body.utf8.count, radix: 16) + "\r\n" + body + "\r\n")
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)

        _ = try channel.finish()
        #expect(!writer.write(events, as: .ndjson), "a closed channel leaves the batch to the response writer")
    }

    @Test func noDirectWritesWithoutAnHTTP1Encoder() {
        #expect(DirectChunkWriter(channel: EmbeddedChannel()) == nil)
    }
}
