// Opens N NDJSON streams to a pgherald socket on one NIO thread, records every
// event, and prints what arrived once the expected number has come in (or
// the wait runs out). The latency of an event is receipt minus its `at` (when
// its trigger ran, just before commit), so it is an upper bound on
// commit-to-client latency.
//
// With --baseline CONNINFO it also runs a bare libpq LISTEN client, measured
// the same way: the floor that commit and NOTIFY set, without pgherald.
//
// Usage: HeraldSocketBench SOCKET SUBSCRIBERS [WAIT_SECONDS] [--baseline CONNINFO]
// Prints "ready" once every stream is open, reads the number of committed
// events from stdin, and prints the figures as key=value lines.

#if canImport(Glibc)
import Glibc
#endif
import Foundation
import HeraldPostgres
import NIOCore
import Synchronization
import NIOHTTP1
import NIOPosix

/// Lives on its channel's event loop; read it there only.
final class StreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    var record = StreamRecord()
    let path: String

    init(path: String) {
        self.path = path
    }

    func channelActive(context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: "localhost")
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .body(let buffer) = unwrapInboundIn(data) {
            let now = nowMicroseconds()
            buffer.withUnsafeReadableBytes { record.consume($0, now: now) }
        }
    }
}

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

func percentile(_ sorted: [Int64], _ fraction: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    let index = min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1)
    return Double(sorted[max(index, 0)]) / 1000
}

let arguments = CommandLine.arguments
guard arguments.count >= 3, let subscribers = Int(arguments[2]) else {
    print("usage: HeraldSocketBench SOCKET SUBSCRIBERS [WAIT_SECONDS]")
    exit(2)
}
let socketPath = arguments[1]
let waitSeconds = arguments.count > 3 ? Double(arguments[3]) ?? 30 : 30
let baselineConnInfo = arguments.firstIndex(of: "--baseline").flatMap { arguments.indices.contains($0 + 1) ? arguments[$0 + 1] : nil }

/// A bare libpq listener on its own thread, recording latencies from the raw trigger payloads.
final class BaselineListener: Sendable {
    let latencies = Mutex<[Int64]>([])
    let stopped = Mutex(false)

    init(connInfo: String) throws {
        let connectionString = try ConnectionString(connInfo)
        let ready = DispatchSemaphore(value: 0)
        let thread = Thread { [self] in
            do {
                let connection = try PostgresConnection.connect(connectionString, applicationName: "bench-baseline")
                try connection.execute("LISTEN pgherald")
                ready.signal()
                while !stopped.withLock({ $0 }) {
                    do {
                        try connection.receiveNotifications(until: .now + .milliseconds(200)) { _, payload, _ in
                            let now = nowMicroseconds()
                            if let at = StreamRecord.timestamp(in: UnsafeRawBufferPointer(payload)) {
                                latencies.withLock { $0.append(now - at) }
                            }
                        }
                    } catch let error as PostgresError where error.code == .timedOut {}
                }
            } catch {
                print("baseline listener: \(error)")
                ready.signal()
            }
        }
        thread.start()
        ready.wait()
    }
}

let baseline = try baselineConnInfo.map { try BaselineListener(connInfo: $0) }

@available(*, unavailable)
extension StreamHandler: Sendable {}

/// Totals over every stream, gathered on the event loop; latencies only when asked.
func summarize(_ channels: [any Channel], latencies: Bool = false) async throws -> (received: Int, outOfOrder: Int, latencies: [Int64]) {
    var total = (received: 0, outOfOrder: 0, latencies: [Int64]())
    for channel in channels {
        let record = try await channel.eventLoop.submit {
            let record = try channel.pipeline.syncOperations.handler(type: StreamHandler.self).record
            return (record.received, record.outOfOrder, latencies ? record.latenciesMicroseconds : [])
        }.get()
        total.received += record.0
        total.outOfOrder += record.1
        total.latencies += record.2
    }
    return total
}

let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
var channels: [any Channel] = []
for _ in 0..<subscribers {
    channels.append(try await ClientBootstrap(group: group)
        .channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHTTPClientHandlers()
                try channel.pipeline.syncOperations.addHandler(StreamHandler(path: "/events?format=ndjson"))
            }
        }
        .connect(unixDomainSocketPath: socketPath)
        .get())
}
print("ready")
fflush(nil)

// Events are recorded from now on. Once the writer is done, the driver sends
// the number of events it committed on stdin.
let cpuBefore = cpuSeconds()
guard let line = readLine(), let expected = Int(line) else {
    print("expected the number of committed events on stdin")
    exit(2)
}
let deadline = nowMicroseconds() + Int64(waitSeconds * 1_000_000)
var summary = try await summarize(channels)
while summary.received < expected * subscribers, nowMicroseconds() < deadline {
    try await Task.sleep(for: .milliseconds(200))
    summary = try await summarize(channels)
}
summary = try await summarize(channels, latencies: true)
let cpu = cpuSeconds() - cpuBefore
let latencies = summary.latencies.sorted()
print("subscribers=\(subscribers)")
print("expected_per_subscriber=\(expected)")
print("received=\(summary.received)")
print("delivered_ratio=\(Double(summary.received) / Double(max(expected * subscribers, 1)))")
print("out_of_order=\(summary.outOfOrder)")
print("p50_ms=\(percentile(latencies, 0.5))")
print("p99_ms=\(percentile(latencies, 0.99))")
print("p999_ms=\(percentile(latencies, 0.999))")
print("max_ms=\(latencies.last.map { Double($0) / 1000 } ?? .nan)")
print("client_cpu_seconds=\(cpu)")
if let baseline {
    baseline.stopped.withLock { $0 = true }
    let bare = baseline.latencies.withLock { $0 }.sorted()
    print("baseline_received=\(bare.count)")
    print("baseline_p50_ms=\(percentile(bare, 0.5))")
    print("baseline_p99_ms=\(percentile(bare, 0.99))")
    print("baseline_p999_ms=\(percentile(bare, 0.999))")
    print("baseline_max_ms=\(bare.last.map { Double($0) / 1000 } ?? .nan)")
}
try await group.shutdownGracefully()
