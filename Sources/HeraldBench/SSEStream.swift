#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

/// How a stream reaches the daemon.
enum StreamTransport {
    /// Its Unix socket, one connection per stream.
    case unixSocket(String)
    /// Its network listener over HTTPS, streams sharing HTTP/2 connections, with a token.
    case http2(HTTP2Connections, token: String)
    /// A TCP listener over HTTP/1.1, a connection per stream: TLS when `tls` is given.
    case http1(host: String, port: Int, tls: NIOSSLContext?, token: String)
}

/// One subscriber: an SSE stream on the daemon's socket or over HTTP/2, parsed line by line.
///
/// When the daemon closes the stream (say, after `event: overflow`), it
/// reconnects with `Last-Event-ID`, as a real client does, so that the record
/// shows whether anything was lost across the resume.
/// Lives on one event loop; touch it there only.
final class SSEStream: BenchStream {
    let transport: StreamTransport
    let path: String
    let eventLoop: any EventLoop
    var record = StreamRecord()
    /// Reads a `data:` line instead of the event reader, for streams that
    /// are not `/events` (a live query's frames).
    var onData: ((_ line: UnsafeRawBufferPointer, _ now: Int64, _ record: inout StreamRecord) -> Void)?
    /// With `group=transaction`: how many events each transaction must hold;
    /// one that arrives split, or merged with another, fails the stream.
    var transactionSize: Int?
    /// Checks each event's key `id` for gaps instead of `count`, for a stream
    /// that follows one table while others change too (`?table=`).
    var countsByKey = false
    /// Whether the daemon refused or broke the stream in a way a resume cannot mend.
    var failure: String?
    /// Until then (microseconds, as ``nowMicroseconds()``), a reconnect that
    /// fails, or finds the daemon not ready (503), is tried again every
    /// 100–200 ms, as a browser's EventSource does while a server restarts.
    /// Without it, one failed reconnect ends the stream.
    var reconnectUntil: Int64?
    private var partialLine: [UInt8] = []
    private var frameEvent: Substring = ""
    private var stopped = false

    convenience init(socketPath: String, path: String, eventLoop: any EventLoop) {
        self.init(transport: .unixSocket(socketPath), path: path, eventLoop: eventLoop)
    }

    init(transport: StreamTransport, path: String, eventLoop: any EventLoop) {
        self.transport = transport
        self.path = path
        self.eventLoop = eventLoop
    }

    /// Opens the stream; the future completes once the response head has arrived.
    func connect() -> EventLoopFuture<Void> {
        eventLoop.assertInEventLoop()
        let opened = eventLoop.makePromise(of: Void.self)
        let handler = NIOLoopBound(SSEStreamHandler(stream: self, opened: opened), eventLoop: eventLoop)
        switch transport {
        case .unixSocket(let socketPath):
            ClientBootstrap(group: eventLoop)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(handler.value)
                    }
                }
                .connect(unixDomainSocketPath: socketPath)
                .whenFailure { opened.fail($0) }
        case .http1(let host, let port, let tls, _):
            ClientBootstrap(group: eventLoop)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        if let tls { try sync.addHandler(NIOSSLClientHandler(context: tls, serverHostname: host)) }
                        try sync.addHTTPClientHandlers()
                        try sync.addHandler(handler.value)
                    }
                }
                .connect(host: host, port: port)
                .whenFailure { opened.fail($0) }
        case .http2(let connections, _):
            connections.openStream { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(HTTP2FramePayloadToHTTP1ClientCodec(httpProtocol: .https))
                    try channel.pipeline.syncOperations.addHandler(handler.value)
                }
            }
            .whenFailure { opened.fail($0) }
        }
        return opened.futureResult
    }

    /// No more reconnects.
    func stop() {
        stopped = true
    }

    var requestHeaders: HTTPHeaders {
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: "localhost")
        headers.add(name: "Accept", value: "text/event-stream")
        switch transport {
        case .unixSocket: break
        case .http2(_, let token), .http1(_, _, _, let token): headers.add(name: "Authorization", value: "Bearer \(token)")
        }
        if let id = record.lastEventID { headers.add(name: "Last-Event-ID", value: String(id)) }
        return headers
    }

    func closed() {
        guard !stopped, failure == nil else { return }
        record.resumes += 1
        reconnect(after: .milliseconds(20))
    }

    /// Whether a refusal or a failed connect is tried again rather than ending the stream.
    var retriesReconnects: Bool {
        reconnectUntil.map { !stopped && nowMicroseconds() < $0 } ?? false
    }

    private func reconnect(after delay: TimeAmount) {
        eventLoop.assumeIsolated().scheduleTask(in: delay) { [self] in
            connect().assumeIsolated().whenFailure { [self] error in
                // A refusal that is retried closes its connection, and closed() tries again.
                guard failure == nil, !stopped else { return }
                if retriesReconnects {
                    if case ChannelError.inputClosed = error { return }
                    reconnect(after: .milliseconds(100 + Int64.random(in: 0..<100)))
                } else {
                    failure = "reconnect failed: \(error)"
                }
            }
        }
    }

    /// Consumes body bytes: complete lines are parsed, the rest kept for the next read.
    func consume(_ bytes: UnsafeRawBufferPointer, now: Int64) {
        var start = 0
        while start < bytes.count {
            guard let newline = memchr(bytes.baseAddress! + start, Int32(UInt8(ascii: "\n")), bytes.count - start) else { break }
            let end = bytes.baseAddress!.distance(to: UnsafeRawPointer(newline))
            if partialLine.isEmpty {
                line(UnsafeRawBufferPointer(rebasing: bytes[start..<end]), now: now)
            } else {
                partialLine.append(contentsOf: bytes[start..<end])
                let joined = partialLine
                partialLine.removeAll(keepingCapacity: true)
                joined.withUnsafeBytes { line($0, now: now) }
            }
            start = end + 1
        }
        if start < bytes.count { partialLine.append(contentsOf: bytes[start...]) }
    }

    private func line(_ line: UnsafeRawBufferPointer, now: Int64) {
        guard let first = line.first else {
            frameEvent = ""
            return
        }
        switch first {
        case UInt8(ascii: "d"):  // data: {...}
            guard frameEvent != "overflow", frameEvent != "reset" else { return }
            if let onData {
                onData(line, now, &record)
                return
            }
            if frameEvent == "transaction" {
                let events = EventFields.groupedEvents(in: line)
                if let transactionSize, events.count != transactionSize, failure == nil {
                    failure = "a transaction of \(transactionSize) rows arrived as a message of \(events.count)"
                }
                for event in events { record.record(count: event.count, at: event.at, now: now) }
            } else if let count = countsByKey ? EventFields.keyID(in: line) : EventFields.count(in: line), let at = EventFields.timestamp(in: line) {
                record.record(count: count, at: at, now: now)
            }
        case UInt8(ascii: "i"):  // id: N
            record.lastEventID = Substring(decoding: line.dropFirst(4), as: UTF8.self)
        case UInt8(ascii: "e"):  // event: op
            frameEvent = Substring(decoding: line.dropFirst(7), as: UTF8.self)
            if frameEvent == "overflow" { record.overflows += 1 }
            if frameEvent == "reset" { failure = "the daemon could not resume the stream (event: reset)" }
        default:  // comments (heartbeats) and retry:
            break
        }
    }
}

/// Sends the request, and feeds the response body to its ``SSEStream``.
final class SSEStreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    let stream: SSEStream
    private let opened: EventLoopPromise<Void>
    private var settled = false

    init(stream: SSEStream, opened: EventLoopPromise<Void>) {
        self.stream = stream
        self.opened = opened
    }

    func channelActive(context: ChannelHandlerContext) {
        let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: stream.path, headers: stream.requestHeaders)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            if head.status != .ok {
                if !(head.status == .serviceUnavailable && stream.retriesReconnects) {
                    stream.failure = "the daemon answered \(head.status.code)"
                }
                settle(.failure(ChannelError.inputClosed))
                context.close(promise: nil)
            } else {
                settle(.success(()))
            }
        case .body(let buffer):
            let now = nowMicroseconds()
            buffer.withUnsafeReadableBytes { stream.consume($0, now: now) }
        case .end:
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        settle(.failure(ChannelError.inputClosed))
        stream.closed()
    }

    private func settle(_ result: Result<Void, any Error>) {
        guard !settled else { return }
        settled = true
        opened.completeWith(result)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension SSEStreamHandler: Sendable {}

@available(*, unavailable)
extension SSEStream: Sendable {}
