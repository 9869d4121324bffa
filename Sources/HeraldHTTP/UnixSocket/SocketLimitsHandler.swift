package import HTTPTypes
import Hummingbird
package import NIOCore
package import NIOHTTPTypes
import Synchronization

/// The socket's limits against broken or hostile clients, enforced on each
/// request before any route runs: a request target longer than
/// ``maximumTargetBytes`` gets `414`, headers past ``maximumHeaderBytes`` or
/// ``maximumHeaderFields`` get `431` (past 80 KiB the HTTP parser itself
/// answers `400`).
///
/// Connections are counted where they are accepted (``SocketChildChannel``,
/// or ``RealtimeUpgradeGuard`` on TCP) with a ``Counter``: one opened beyond
/// `maximumConnections` is answered `503` at its first request and closed,
/// so that thousands of idle connections cannot take every descriptor (the
/// request timeout closes those that never send a request).
///
/// A channel handler rather than a router middleware: every stream's task
/// keeps the deepest async stack it ever reached for its whole life, and a
/// middleware frame on the way in cost each idle stream about 1 KiB.
package final class SocketLimitsHandler: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPRequestPart
    package typealias InboundOut = HTTPRequestPart
    package typealias OutboundIn = HTTPResponsePart
    package typealias OutboundOut = HTTPResponsePart

    /// The longest request target: a filter at its documented limits fits.
    package static let maximumTargetBytes = 8192
    /// The most header bytes (names and values) and header fields.
    package static let maximumHeaderBytes = 16_384
    package static let maximumHeaderFields = 100

    package init() {}

    /// The count of open connections, shared by every connection's handler.
    package final class Counter: Sendable {
        package let limit: Int
        private let open = Atomic(0)

        package init(limit: Int) {
            self.limit = limit
        }

        /// Counts a connection; whether it is within the limit.
        package func admit() -> Bool {
            open.add(1, ordering: .relaxed).newValue <= limit
        }

        package func release() {
            open.subtract(1, ordering: .relaxed)
        }
    }

    /// A refused request: its status, error code and message.
    package struct Refusal {
        package let status: HTTPResponse.Status
        package let code: String
        package let message: String
    }

    /// The refusal for a connection past the limit of `limit` connections.
    package static func tooManyConnections(limit: Int) -> Refusal {
        Refusal(status: .serviceUnavailable, code: "too_many_connections", message: "the socket serves at most \(limit) connections")
    }

    /// The refusal for a request, or nil when it is within the limits.
    package static func refusal(targetBytes: Int, headerBytes: Int, headerFields: Int) -> Refusal? {
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

    /// A refusal was sent: the rest of the request is dropped until the channel closes.
    private var refused = false

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        guard case .head(let request) = unwrapInboundIn(data) else { return context.fireChannelRead(data) }
        var headerBytes = 0
        for field in request.headerFields { headerBytes += field.name.rawName.utf8.count + field.value.utf8.count }
        let refusal = Self.refusal(targetBytes: request.path?.utf8.count ?? 0, headerBytes: headerBytes, headerFields: request.headerFields.count)
        if let refusal {
            refuse(context, refusal)
        } else {
            context.fireChannelRead(data)
        }
    }

    private func refuse(_ context: ChannelHandlerContext, _ refusal: Refusal) {
        refused = true
        Self.answer(context, status: refusal.status, ErrorBody(code: refusal.code, message: refusal.message))
    }

    /// Answers a request with a JSON error from a handler that writes
    /// `HTTPResponsePart`s, then closes the connection.
    /// - Parameter headers: added to the answer's head (CORS, over the network).
    package static func answer(_ context: ChannelHandlerContext, status: HTTPResponse.Status, _ body: ErrorBody, headers: HTTPFields = HTTPFields()) {
        let bytes = Response.jsonBuffer(body)
        var fields = headers
        fields[.contentType] = "application/json"
        fields[.contentLength] = String(bytes.readableBytes)
        fields[.connection] = "close"
        let head = HTTPResponse(status: status, headerFields: fields)
        context.write(NIOAny(HTTPResponsePart.head(head)), promise: nil)
        context.write(NIOAny(HTTPResponsePart.body(bytes)), promise: nil)
        let channel = context.channel
        context.writeAndFlush(NIOAny(HTTPResponsePart.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}
