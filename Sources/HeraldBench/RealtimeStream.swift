import NIOCore
import NIOPosix

/// One Supabase Realtime client on the daemon's socket: a WebSocket that
/// joins `realtime:bench` with a `*` binding on `bench_event`, read frame by
/// frame. The row's `id` stands in for the change counter, and its
/// `commit_timestamp` (milliseconds) for `at`.
///
/// When the daemon ends the channel with `phx_error` (it fell behind), it
/// rejoins, as Supabase's clients do, and the daemon replays what it missed.
/// Lives on one event loop; touch it there only.
final class RealtimeStream: BenchStream {
    /// What the client presents and joins.
    struct Client: Sendable {
        var table: String
        /// A user's token, for row-level security; nil: the socket peer's access applies.
        var apikey: String?
        /// A binding filter, such as `team=eq.3`.
        var filter: String?
        /// The team whose rows (id % teams) alone it expects; nil: every row.
        var team: UInt64?

        init(table: String, apikey: String? = nil, filter: String? = nil, team: UInt64? = nil) {
            self.table = table
            self.apikey = apikey
            self.filter = filter
            self.team = team
        }
    }

    let socketPath: String
    let eventLoop: any EventLoop
    let client: Client
    var record = StreamRecord()
    var failure: String?
    private var stopped = false

    init(socketPath: String, eventLoop: any EventLoop, client: Client, teams: Int = 1) {
        self.socketPath = socketPath
        self.eventLoop = eventLoop
        self.client = client
        record.team = client.team
        record.stride = UInt64(teams)
    }

    func connect() -> EventLoopFuture<Void> {
        eventLoop.assertInEventLoop()
        let subscribed = eventLoop.makePromise(of: Void.self)
        let handler = NIOLoopBound(RealtimeStreamHandler(stream: self, subscribed: subscribed), eventLoop: eventLoop)
        ClientBootstrap(group: eventLoop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(handler.value) }
            }
            .connect(unixDomainSocketPath: socketPath)
            .whenFailure { subscribed.fail($0) }
        return subscribed.futureResult
    }

    func stop() {
        stopped = true
    }

    func closed() {
        if !stopped, failure == nil { failure = "the daemon closed the WebSocket" }
    }

    var upgradeRequest: String {
        """
        GET /realtime/v1/websocket?vsn=1.0.0\(client.apikey.map { "&apikey=\($0)" } ?? "") HTTP/1.1\r
        Host: localhost\r
        Upgrade: websocket\r
        Connection: Upgrade\r
        Sec-WebSocket-Key: cGdoZXJhbGQtYmVuY2gtMQ==\r
        Sec-WebSocket-Version: 13\r
        \r

        """
    }

    var join: String {
        let filter = client.filter.map { #","filter":"\#($0)""# } ?? ""
        return #"{"topic":"realtime:bench","event":"phx_join","payload":{"config":{"postgres_changes":[{"event":"*","schema":"public","table":"\#(client.table)"\#(filter)}]}},"ref":"1","join_ref":"1"}"#
    }
}

/// Upgrades, joins, and hands each text message to its ``RealtimeStream``.
final class RealtimeStreamHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let stream: RealtimeStream
    private let subscribed: EventLoopPromise<Void>
    private var upgraded = false
    private var settled = false
    private var reader = WebSocketFrameReader()

    init(stream: RealtimeStream, subscribed: EventLoopPromise<Void>) {
        self.stream = stream
        self.subscribed = subscribed
    }

    func channelActive(context: ChannelHandlerContext) {
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: stream.upgradeRequest)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        reader.append(&bytes)
        if !upgraded {
            guard let head = reader.takeHTTPHead() else { return }
            guard head.hasPrefix("HTTP/1.1 101") else {
                stream.failure = "the daemon refused the upgrade: \(head.prefix { $0 != "\r" })"
                settle(.failure(ChannelError.inputClosed))
                context.close(promise: nil)
                return
            }
            upgraded = true
            context.writeAndFlush(wrapOutboundOut(WebSocketFrameReader.maskedText(stream.join)), promise: nil)
        }
        let now = nowMicroseconds()
        while let message = reader.nextTextMessage() {
            message.withUnsafeReadableBytes { text in handle(text, now: now, context: context) }
        }
    }

    private func handle(_ text: UnsafeRawBufferPointer, now: Int64, context: ChannelHandlerContext) {
        if let id = EventFields.recordID(in: text), let at = EventFields.commitTimestamp(in: text) {
            stream.record.record(count: id, at: at, now: now)
        } else if contains(text, #""event":"system""#) {
            if contains(text, #""status":"ok""#) {
                settle(.success(()))
            } else {
                stream.failure = "the join failed: \(String(decoding: text, as: UTF8.self).prefix(200))"
                settle(.failure(ChannelError.inputClosed))
            }
        } else if contains(text, #""event":"phx_error""#) {
            stream.record.overflows += 1
            stream.record.resumes += 1
            context.writeAndFlush(wrapOutboundOut(WebSocketFrameReader.maskedText(stream.join)), promise: nil)
        }
    }

    private func contains(_ text: UnsafeRawBufferPointer, _ needle: StaticString) -> Bool {
        let pattern = UnsafeRawBufferPointer(start: needle.utf8Start, count: needle.utf8CodeUnitCount)
        return text.firstRange(of: pattern) != nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        settle(.failure(ChannelError.inputClosed))
        stream.closed()
    }

    private func settle(_ result: Result<Void, any Error>) {
        guard !settled else { return }
        settled = true
        subscribed.completeWith(result)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// Reads an HTTP response head and then WebSocket frames from the bytes a
/// server sends (unmasked, as servers send them); writes masked text
/// frames, as clients must.
struct WebSocketFrameReader {
    private var buffer = ByteBuffer()

    mutating func append(_ bytes: inout ByteBuffer) {
        buffer.writeBuffer(&bytes)
    }

    /// The response head, once `\r\n\r\n` has arrived, consumed from the buffer.
    mutating func takeHTTPHead() -> String? {
        guard let end = buffer.readableBytesView.firstRange(of: Array("\r\n\r\n".utf8)) else { return nil }
        let length = end.upperBound - buffer.readerIndex
        return buffer.readString(length: length)
    }

    /// The next complete text message; other frames (pings, binary) are skipped.
    mutating func nextTextMessage() -> ByteBuffer? {
        while let (opcode, payload) = nextFrame() {
            if opcode == 0x1 { return payload }
        }
        return nil
    }

    private mutating func nextFrame() -> (opcode: UInt8, payload: ByteBuffer)? {
        guard let first = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self),
              let second = buffer.getInteger(at: buffer.readerIndex + 1, as: UInt8.self) else { return nil }
        var headerLength = 2
        var length = Int(second & 0x7F)
        if length == 126 {
            guard let extended = buffer.getInteger(at: buffer.readerIndex + 2, as: UInt16.self) else { return nil }
            length = Int(extended)
            headerLength += 2
        } else if length == 127 {
            guard let extended = buffer.getInteger(at: buffer.readerIndex + 2, as: UInt64.self) else { return nil }
            length = Int(extended)
            headerLength += 8
        }
        guard buffer.readableBytes >= headerLength + length else { return nil }
        buffer.moveReaderIndex(forwardBy: headerLength)
        let payload = buffer.readSlice(length: length)!
        if buffer.readableBytes == 0 { buffer.clear() }
        return (first & 0x0F, payload)
    }

    /// A client's text frame: masked, with a fixed key (the bench needs no secrecy).
    static func maskedText(_ text: String) -> ByteBuffer {
        let payload = Array(text.utf8)
        let mask: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        var frame = ByteBuffer()
        frame.writeInteger(UInt8(0x81))
        if payload.count < 126 {
            frame.writeInteger(UInt8(0x80 | payload.count))
        } else {
            frame.writeInteger(UInt8(0x80 | 126))
            frame.writeInteger(UInt16(payload.count))
        }
        frame.writeBytes(mask)
        frame.writeBytes(payload.enumerated().map { $0.element ^ mask[$0.offset % 4] })
        return frame
    }
}

@available(*, unavailable)
extension RealtimeStreamHandler: Sendable {}

@available(*, unavailable)
extension RealtimeStream: Sendable {}
