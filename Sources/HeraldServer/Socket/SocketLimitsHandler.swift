import HTTPTypes
import NIOCore
import NIOHTTPTypes
import Synchronization

/// The socket's limits against broken or hostile clients, enforced on each
/// connection's channel before any route runs:
/// - a connection opened beyond `maximumConnections` is answered `503` at
///   its first request and closed, so that thousands of idle connections
///   cannot take every descriptor (the idle timeout closes those that never
///   send a request);
/// - a request target longer than ``maximumTargetBytes`` gets `414`, headers
///   past ``maximumHeaderBytes`` or ``maximumHeaderFields`` get `431` (past
///   80 KiB the HTTP parser itself answers `400`).
///
/// A channel handler rather than a router middleware: every stream's task
/// keeps the deepest async stack it ever reached for its whole life, and a
/// middleware frame on the way in cost each idle stream about 1 KiB.
final class SocketLimitsHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The longest request target: a filter at its documented limits fits.
    static let maximumTargetBytes = 8192
    /// The most header bytes (names and values) and header fields.
    static let maximumHeaderBytes = 16_384
    static let maximumHeaderFields = 100

    /// The count of open connections, shared by every connection's handler.
    final class Counter: Sendable {
        let limit: Int
        private let open = Atomic(0)

        init(limit: Int) {
            self.limit = limit
        }

        /// Counts a connection; whether it is within the limit.
        func admit() -> Bool {
            open.add(1, ordering: .relaxed).newValue <= limit
        }

        func release() {
            open.subtract(1, ordering: .relaxed)
        }
    }

    private let counter: Counter
    private var counted = false
    private var admitted = true
    /// A refusal was sent: the rest of the request is dropped until the channel closes.
    private var refused = false

    init(counter: Counter) {
        self.counter = counter
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { count() }
    }

    func channelActive(context: ChannelHandlerContext) {
        count()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        uncount()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        uncount()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        guard case .head(let request) = unwrapInboundIn(data) else { return context.fireChannelRead(data) }
        if !admitted {
            refuse(context, .serviceUnavailable, "too_many_connections", "the socket serves at most \(counter.limit) connections")
        } else if (request.path?.utf8.count ?? 0) > Self.maximumTargetBytes {
            refuse(context, .uriTooLong, "request_target_too_long", "the request target is longer than \(Self.maximumTargetBytes) bytes")
        } else if !Self.headersFit(request.headerFields) {
            refuse(
                context, .init(code: 431, reasonPhrase: "Request Header Fields Too Large"), "headers_too_large",
                "the headers are longer than \(Self.maximumHeaderBytes) bytes or more than \(Self.maximumHeaderFields) fields"
            )
        } else {
            context.fireChannelRead(data)
        }
    }

    private static func headersFit(_ fields: HTTPFields) -> Bool {
        var size = 0
        var count = 0
        for field in fields {
            size += field.name.rawName.utf8.count + field.value.utf8.count
            count += 1
        }
        return size <= maximumHeaderBytes && count <= maximumHeaderFields
    }

    /// Answers with a JSON error and closes the connection.
    private func refuse(_ context: ChannelHandlerContext, _ status: HTTPResponse.Status, _ code: String, _ message: String) {
        refused = true
        var body = context.channel.allocator.buffer(capacity: 160)
        body.writeString(#"{"error":"\#(code)","message":"\#(message)"}"# + "\n")
        let head = HTTPResponse(status: status, headerFields: [
            .contentType: "application/json", .contentLength: String(body.readableBytes), .connection: "close",
        ])
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }

    private func count() {
        guard !counted else { return }
        counted = true
        admitted = counter.admit()
    }

    private func uncount() {
        guard counted else { return }
        counted = false
        counter.release()
    }
}
