import NIOCore
import NIOPosix

/// Many streams, spread over a few event loops.
final class Fleet<Stream: BenchStream>: Sendable {
    struct Shard: Sendable {
        let eventLoop: any EventLoop
        let streams: NIOLoopBound<[Stream]>
    }

    /// Totals over every stream.
    struct Tally: Sendable {
        var record = StreamRecord()
        var complete = 0
        var failedStreams = 0
        var firstFailure: String?
        var firstReceipt: Int64?

        mutating func add(_ other: Tally, latencies: Bool) {
            record.received += other.record.received
            record.missing += other.record.missing
            record.foreign += other.record.foreign
            record.duplicatedOrReordered += other.record.duplicatedOrReordered
            record.overflows += other.record.overflows
            record.resumes += other.record.resumes
            record.lastReceiptMicroseconds = max(record.lastReceiptMicroseconds, other.record.lastReceiptMicroseconds)
            if latencies { record.latencies += other.record.latencies }
            if let first = other.firstReceipt { firstReceipt = min(firstReceipt ?? first, first) }
            complete += other.complete
            failedStreams += other.failedStreams
            firstFailure = firstFailure ?? other.firstFailure
        }
    }

    let shards: [Shard]

    private init(shards: [Shard]) {
        self.shards = shards
    }

    /// Opens `subscribers` streams that `make` creates on each loop, a few at a time per loop.
    static func connect(
        subscribers: Int, group: MultiThreadedEventLoopGroup, make: @escaping @Sendable (any EventLoop) -> Stream
    ) async throws -> Fleet {
        let loops = Array(group.makeIterator())
        var shards: [Shard] = []
        for (index, loop) in loops.enumerated() {
            let share = subscribers / loops.count + (index < subscribers % loops.count ? 1 : 0)
            let streams = try await loop.submit {
                NIOLoopBound((0..<share).map { _ in make(loop) }, eventLoop: loop)
            }.get()
            shards.append(Shard(eventLoop: loop, streams: streams))
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for shard in shards {
                group.addTask {
                    let total = try await shard.eventLoop.submit { shard.streams.value.count }.get()
                    for start in stride(from: 0, to: total, by: 128) {
                        try await shard.eventLoop.flatSubmit {
                            let opening = shard.streams.value[start..<min(start + 128, total)].map { $0.connect() }
                            return EventLoopFuture.andAllSucceed(opening, on: shard.eventLoop)
                        }.get()
                    }
                }
            }
            try await group.waitForAll()
        }
        return Fleet(shards: shards)
    }

    /// Adds up every stream; `expected` decides which streams count as complete.
    func tally(expected: Int, latencies: Bool) async throws -> Tally {
        var total = Tally()
        for shard in shards {
            let part = try await shard.eventLoop.submit {
                var part = Tally()
                for stream in shard.streams.value {
                    let record = stream.record
                    part.add(Tally(
                        record: record,
                        // A repeat does not make up for an event still missing.
                        complete: record.received - record.duplicatedOrReordered >= expected ? 1 : 0,
                        failedStreams: stream.failure == nil ? 0 : 1,
                        firstFailure: stream.failure,
                        firstReceipt: record.received > 0 ? record.firstReceiptMicroseconds : nil
                    ), latencies: latencies)
                }
                return part
            }.get()
            total.add(part, latencies: latencies)
        }
        return total
    }

    /// Ends reconnects, so that the streams can be closed with the group.
    func stop() async throws {
        for shard in shards {
            try await shard.eventLoop.submit { shard.streams.value.forEach { $0.stop() } }.get()
        }
    }
}
