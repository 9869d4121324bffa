@testable import HeraldBench
import NIOCore
import NIOEmbedded
import Testing

/// The load client's checks decide whether a benchmark run counts, so they are tested like the daemon.
@Suite struct LoadClientTests {
    @Test func countsGapsAndRepeatsFromTheChangeCounter() {
        var record = StreamRecord()
        for count: UInt64 in [5, 6, 8, 8, 7, 9] {
            record.record(count: count, at: 0, now: 1000)
        }
        #expect(record.received == 6)
        #expect(record.missing == 1)
        #expect(record.duplicatedOrReordered == 2)
        #expect(record.latencies == [1000, 1000, 1000, 1000, 1000, 1000])
    }

    @Test func percentilesAreNearestRank() throws {
        let latency = try #require(LoadResult.Latency(sorted: (1...1000).map { Int32($0 * 1000) }))
        #expect(latency.p50 == 500)
        #expect(latency.p99 == 990)
        #expect(latency.p999 == 999)
        #expect(latency.max == 1000)
        #expect(LoadResult.Latency(sorted: []) == nil)
        let cdf = LoadResult.cdf(sorted: [1000, 2000])
        #expect(cdf.first == [1, 0])
        #expect(cdf.last == [2, 1])
    }

    @Test func readsTheRowIDAndCommitTimestampOfARealtimeChange() {
        let change = Array(#"{"topic":"realtime:bench","event":"postgres_changes","payload":{"ids":[1],"data":{"schema":"public","table":"bench_event","commit_timestamp":"2026-11-21T12:00:00.123Z","type":"INSERT","columns":[],"record":{"id":77,"payload":"x"},"errors":null}},"ref":null}"#.utf8)
        change.withUnsafeBytes { bytes in
            #expect(EventFields.recordID(in: bytes) == 77)
            #expect(EventFields.commitTimestamp(in: bytes) == 1_795_262_400_123_000)
        }
    }

    @Test func readsFramesSplitAnywhere() {
        var server = ByteBuffer(string: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n")
        for text in ["short", String(repeating: "y", count: 300)] {
            server.writeInteger(UInt8(0x81))
            if text.utf8.count < 126 {
                server.writeInteger(UInt8(text.utf8.count))
            } else {
                server.writeInteger(UInt8(126))
                server.writeInteger(UInt16(text.utf8.count))
            }
            server.writeString(text)
        }
        server.writeBytes([0x89, 0x00])  // a ping, skipped
        var reader = WebSocketFrameReader()
        var messages: [String] = []
        var head: String?
        while server.readableBytes > 0 {
            var piece = server.readSlice(length: min(7, server.readableBytes))!
            reader.append(&piece)
            if head == nil { head = reader.takeHTTPHead() }
            guard head != nil else { continue }
            while var message = reader.nextTextMessage() { messages.append(message.readString(length: message.readableBytes)!) }
        }
        #expect(head?.hasPrefix("HTTP/1.1 101") == true)
        #expect(messages == ["short", String(repeating: "y", count: 300)])
        var masked = WebSocketFrameReader.maskedText("hi")
        #expect(masked.readBytes(length: masked.readableBytes) == [0x81, 0x82, 0x12, 0x34, 0x56, 0x78, 0x68 ^ 0x12, 0x69 ^ 0x34])
    }

    @Test func readsTheCountAndTimeOfDaemonAndTriggerJSON() {
        let daemon = Array(#"{"id":"7","count":42,"op":"INSERT","at":"2026-11-21T12:00:00.123456Z"}"#.utf8)
        let trigger = Array(#"{"id" : "7", "at" : "2026-11-21T12:00:00.123456Z"}"#.utf8)
        daemon.withUnsafeBytes { bytes in
            #expect(EventFields.count(in: bytes) == 42)
            #expect(EventFields.timestamp(in: bytes) == 1_795_262_400_123_456)
        }
        trigger.withUnsafeBytes { bytes in
            #expect(EventFields.count(in: bytes) == nil)
            #expect(EventFields.timestamp(in: bytes) == 1_795_262_400_123_456)
        }
        // A row with a column named "at" comes before the event's own.
        let rowWithAt = Array(#"{"id":"7","count":1,"new":{"at":"1999-01-01T00:00:00.000000Z"},"at":"2026-11-21T12:00:00.123456Z"}"#.utf8)
        rowWithAt.withUnsafeBytes { bytes in
            #expect(EventFields.timestamp(in: bytes) == 1_795_262_400_123_456)
        }
    }

    @Test func parsesServerSentEventsSplitAcrossReads() {
        let stream = SSEStream(socketPath: "/nonexistent", path: "/events", eventLoop: EmbeddedEventLoop())
        let frames = """
            retry: 1000

            : heartbeat

            id: 11
            event: insert
            data: {"id":"11","count":1,"at":"2026-11-21T12:00:00.000000Z"}

            id: 12
            event: update
            data: {"id":"12","count":2,"at":"2026-11-21T12:00:00.000000Z"}

            event: overflow
            data: {"error":"overflow","count":99}


            """
        let bytes = Array(frames.utf8)
        // Every split point, so that lines cut anywhere are joined again.
        for split in [1, 40, 97, bytes.count - 3] {
            let stream = SSEStream(socketPath: "/nonexistent", path: "/events", eventLoop: EmbeddedEventLoop())
            bytes[..<split].withUnsafeBytes { stream.consume($0, now: 0) }
            bytes[split...].withUnsafeBytes { stream.consume($0, now: 0) }
            #expect(stream.record.received == 2, "split at \(split)")
            #expect(stream.record.lastEventID == "12")
            #expect(stream.record.overflows == 1)
            #expect(stream.record.missing == 0)
        }
        #expect(stream.requestHeaders["Last-Event-ID"].isEmpty)
    }
}
