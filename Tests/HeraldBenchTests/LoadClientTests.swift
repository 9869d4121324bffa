@testable import HeraldBench
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
