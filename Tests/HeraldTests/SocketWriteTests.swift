import Herald
@testable import HeraldAPI
@testable import HeraldHTTP
import HeraldWebhooks
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOPosix
import Testing

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

@Suite struct WritePacingTests {
    private let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    /// `share` of each of `windows` 20 ms windows spent working, in one piece at the window's start.
    private func work(_ pacing: inout WritePacing, share: Double, windows: Int, from first: Int = 0) -> [WritePacing.Change?] {
        (first..<first + windows).map { index in
            let windowStart = start + .milliseconds(Int64(20 * index))
            _ = pacing.recordWork(from: windowStart, to: windowStart + .nanoseconds(Int64(share * 20_000_000)))
            // A short piece of work that closes the window.
            let end = windowStart + .milliseconds(20)
            return pacing.recordWork(from: end, to: end)
        }
    }

    @Test func aLoopWithHeadroomWritesAtOnce() {
        var pacing = WritePacing(now: start)
        let changes = work(&pacing, share: 0.45, windows: 50)
        #expect(pacing.spacing == nil)
        #expect(changes.allSatisfy { $0 == nil })
    }

    @Test func aBusyLoopSpacesItsWritesDoublingUpToTheMaximum() {
        var pacing = WritePacing(now: start)
        let changes = work(&pacing, share: 0.6, windows: 1)
        #expect(changes == [.started(spacing: .milliseconds(1))])
        var spacings: [TimeAmount?] = []
        for index in 1...7 {
            _ = work(&pacing, share: 0.6, windows: 1, from: index)
            spacings.append(pacing.spacing)
        }
        #expect(spacings == [2, 4, 8, 16, 32, 32, 32].map { TimeAmount.milliseconds($0) })
    }

    @Test func spacingHoldsBetweenTheSharesAndHalvesBelowTheIdleShare() {
        var pacing = WritePacing(now: start)
        _ = work(&pacing, share: 0.9, windows: 4)
        #expect(pacing.spacing == .milliseconds(8))
        _ = work(&pacing, share: 0.3, windows: 10, from: 4)
        #expect(pacing.spacing == .milliseconds(8), "a loop a third busy keeps its spacing")
        _ = work(&pacing, share: 0.1, windows: 3, from: 14)
        #expect(pacing.spacing == .milliseconds(1))
        #expect(work(&pacing, share: 0.1, windows: 1, from: 17) == [.stopped])
        #expect(pacing.spacing == nil)
    }

    @Test func aLoopQuietForSeveralWindowsWritesAtOnceAgain() {
        var pacing = WritePacing(now: start)
        _ = work(&pacing, share: 0.9, windows: 5)
        #expect(pacing.spacing == .milliseconds(16))
        // Nothing for 100 ms, then one stream's short write: five quiet windows halve it five times.
        let later = start + .milliseconds(200)
        #expect(pacing.recordWork(from: later, to: later + .microseconds(5)) == .stopped)
        #expect(pacing.spacing == nil)
    }

    @Test func theWriteRateIsACeilingUnderTheLoopsOwnSpacing() throws {
        let ticker = WriteTicker(eventLoop: EmbeddedEventLoop(), logger: Logger(label: "test"))
        #expect(ticker.nextWrite(after: .now(), ceiling: nil) == nil, "a loop with headroom writes at once")
        let (due, grid) = try #require(ticker.nextWrite(after: .now(), ceiling: .milliseconds(20)))
        #expect(due > .now() + .milliseconds(19))
        #expect(grid == .milliseconds(5))
    }
}

@Suite struct ReadyStreamsTests {
    /// Counts its wake-ups; touched only on its event loop.
    private final class CountingStream: WakeableStream {
        let eventLoop: any EventLoop
        var wakeUps = 0
        var offLoop = 0
        init(eventLoop: any EventLoop) { self.eventLoop = eventLoop }
        func woken() {
            if !eventLoop.inEventLoop { offLoop += 1 }
            wakeUps += 1
        }
    }

    /// The broker wakes streams from its own thread, many at once and again
    /// while a drain runs: each wake must reach its stream, on its loop.
    @Test func everyWakeFromAnotherThreadReachesItsStreamOnItsLoop() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let ready = ReadyStreams<CountingStream>(eventLoop: loop)
        let streams = try await loop.submit { (0..<1000).map { _ in NIOLoopBound(CountingStream(eventLoop: loop), eventLoop: loop) } }.get()
        let rounds = 20
        await withTaskGroup(of: Void.self) { group in
            for part in 0..<4 {
                group.addTask {
                    for _ in 0..<rounds {
                        for stream in streams[(part * 250)..<((part + 1) * 250)] { ready.wake(stream) }
                        await Task.yield()
                    }
                }
            }
        }
        // Wakes already queued are drained by tasks already scheduled: one more task runs after them.
        let counts = try await loop.submit { streams.map { ($0.value.wakeUps, $0.value.offLoop) } }.get()
        #expect(counts.allSatisfy { $0.0 == rounds }, "a wake was lost or repeated")
        #expect(counts.allSatisfy { $0.1 == 0 }, "a stream was woken off its loop")
    }
}

@Suite struct WriteTickerTests {
    @Test func dueTimesRoundUpToTheGrid() {
        let grid = TimeAmount.milliseconds(5)
        #expect(WriteTicker.tick(for: .uptimeNanoseconds(10_000_000), grid: grid) == .uptimeNanoseconds(10_000_000))
        #expect(WriteTicker.tick(for: .uptimeNanoseconds(10_000_001), grid: grid) == .uptimeNanoseconds(15_000_000))
        #expect(WriteTicker.tick(for: .uptimeNanoseconds(14_999_999), grid: grid) == .uptimeNanoseconds(15_000_000))
    }

    @Test func noStreamRunsBeforeItsGridLine() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let ticker = WriteTicker(eventLoop: loop, logger: Logger(label: "test"))
        let grid = TimeAmount.milliseconds(50)
        let tick = WriteTicker.tick(for: .now() + .milliseconds(120), grid: grid)
        // Two dues on the same grid line share its tick; one on the next line waits for that.
        let dues = [tick - .milliseconds(30), tick, tick + .milliseconds(10)]
        let ran = try await loop.submit {
            let promises = dues.map { _ in loop.makePromise(of: NIODeadline.self) }
            for (due, promise) in zip(dues, promises) {
                ticker.schedule(at: due, grid: grid) { promise.succeed(.now()) }
            }
            return EventLoopFuture.whenAllSucceed(promises.map(\.futureResult), on: loop)
        }.flatMap { $0 }.get()
        #expect(ran[0] >= tick && ran[1] >= tick, "ran before the shared tick")
        #expect(ran[2] >= tick + grid, "ran before its own due's tick")
    }
}

@Suite struct RequestLineSnifferTests {
    @Test(arguments: [
        ("GET /events HTTP/1.1\r\n", RequestLineSniffer.Route.eventStream),
        ("GET /events?table=course HTTP/1.1\r\n", .eventStream),
        ("GET /eventsx HTTP/1.1\r\n", .other),
        ("GET /events/1 HTTP/1.1\r\n", .other),
        ("POST /events HTTP/1.1\r\n", .other),
        ("GET /stats HTTP/1.1\r\n", .other),
        ("get /events HTTP/1.1\r\n", .other),
        ("\u{16}\u{03}\u{01}", .other),
    ])
    func theFirstBytesChooseTheRoute(start: String, route: RequestLineSniffer.Route) {
        #expect(RequestLineSniffer.route(of: ByteBuffer(string: start).readableBytesView) == route)
    }

    @Test func aPrefixOfAStreamRequestWaitsForMore() {
        for end in 0...11 {
            let prefix = String("GET /events".prefix(end))
            #expect(RequestLineSniffer.route(of: ByteBuffer(string: prefix).readableBytesView) == nil, "decided on '\(prefix)'")
        }
    }
}
