import HTTPTypes
import Hummingbird
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
/// Where the socket also serves realtime upgrades, ``RealtimeUpgradeGuard``
/// counts connections and checks each connection's first request; this
/// handler, added without a counter, checks the requests after it.
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

    /// A refused request: its status, error code and message.
    struct Refusal {
        let status: HTTPResponse.Status
        let code: String
        let message: String
    }

    /// The refusal for a request, or nil when it is within the limits.
    static func refusal(admitted: Bool, limit: Int, targetBytes: Int, headerBytes: Int, headerFields: Int) -> Refusal? {
        if !admitted {
            return Refusal(status: .serviceUnavailable, code: "too_many_connections", message: "the socket serves at most \(limit) connections")
        }
        if targetBytes > maximumTargetBytes {
            return Refusal(
                status: .uriTooLong, code: "request_target_too_long", message: "the request target is longer than \(maximumTargetBytes) bytes"
            )
        }
        if headerBytes > maximumHeaderBytes || headerFields > maximumHeaderFields {
            return Refusal(
                status: .init(code: 431, reasonPhrase: "Request Header Fields Too Large"), code: "headers_too_large",
                message: "the headers are longer than \(maximumHeaderBytes) bytes or more than \(maximumHeaderFields) fields"
            )
        }
        return nil
    }

    /// Counts connections against the limit; nil where they are counted before this handler exists.
    private let counter: Counter?
    private var counted = false
    private var admitted = true
    /// A refusal was sent: the rest of the request is dropped until the channel closes.
    private var refused = false

    init(counter: Counter?) {
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
        var headerBytes = 0
        for field in request.headerFields { headerBytes += field.name.rawName.utf8.count + field.value.utf8.count }
        let refusal = Self.refusal(
            admitted: admitted, limit: counter?.limit ?? 0, targetBytes: request.path?.utf8.count ?? 0,
            headerBytes: headerBytes, headerFields: request.headerFields.count
        )
        if let refusal {
            refuse(context, refusal)
        } else {
            context.fireChannelRead(data)
        }
    }

    /// Answers with a JSON error and closes the connection.
    private func refuse(_ context: ChannelHandlerContext, _ refusal: Refusal) {
        refused = true
        let body = Response.jsonBuffer(ErrorBody(code: refusal.code, message: refusal.message))
        let head = HTTPResponse(status: refusal.status, headerFields: [
            .contentType: "application/json", .contentLength: String(body.readableBytes), .connection: "close",
        ])
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }

    private func count() {
        guard let counter, !counted else { return }
        counted = true
        admitted = counter.admit()
    }

    private func uncount() {
        guard let counter, counted else { return }
        counted = false
        counter.release()
    }
}
