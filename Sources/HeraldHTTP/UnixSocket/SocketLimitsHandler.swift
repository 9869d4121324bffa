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

    /// The count of open connections, shared by every connection's handler, in all and per peer address.
    package final class Counter: Sendable {
        package let limit: Int
        /// Connections one peer address may hold; 0: no limit.
        package let perAddress: Int
        /// Where ``perAddress`` is set, for refusals: `http.max_connections_per_address`.
        package let perAddressKey: String
        /// Addresses not limited per address: proxies in front of the listener, whose
        /// connections stand for many clients.
        package let proxies: Set<String>
        private let open = Atomic(0)
        private let byAddress = Mutex<[String: Int]>([:])
        /// When a refusal was last logged: a flood of connections must not flood the log too.
        private let lastLogged = Mutex<ContinuousClock.Instant?>(nil)

        package init(limit: Int, perAddress: Int = 0, perAddressKey: String = "", proxies: Set<String> = []) {
            self.limit = limit
            self.perAddress = perAddress
            self.perAddressKey = perAddressKey
            self.proxies = proxies
        }

        /// Counts a connection from `address` (nil on a Unix socket); why it is refused, or nil within the limits.
        /// Counted either way: ``release(from:)`` follows every close.
        package func admit(from address: SocketAddress? = nil) -> Refusal? {
            let total = open.add(1, ordering: .relaxed).newValue
            var fromAddress = 0
            if let peer = Self.peer(address), perAddress > 0, !proxies.contains(peer) {
                fromAddress = byAddress.withLock { counts in
                    counts[peer, default: 0] += 1
                    return counts[peer]!
                }
            }
            if total > limit { return tooManyConnections(limit: limit) }
            if fromAddress > perAddress {
                return Refusal(
                    status: .tooManyRequests, code: "too_many_connections",
                    message: "one address may hold at most \(perAddress) connections (\(perAddressKey))"
                )
            }
            return nil
        }

        package func release(from address: SocketAddress? = nil) {
            open.subtract(1, ordering: .relaxed)
            guard let peer = Self.peer(address), perAddress > 0, !proxies.contains(peer) else { return }
            byAddress.withLock { counts in
                let left = counts[peer, default: 1] - 1
                counts[peer] = left > 0 ? left : nil
            }
        }

        /// Whether to log a refusal now: at most one line each 10 s.
        package func shouldLogRefusal() -> Bool {
            lastLogged.withLock { last in
                let now = ContinuousClock.now
                guard last.map({ now - $0 >= .seconds(10) }) ?? true else { return false }
                last = now
                return true
            }
        }

        private static func peer(_ address: SocketAddress?) -> String? {
            switch address {
            case .v4?, .v6?: address?.ipAddress
            default: nil
            }
        }
    }

    /// A refused request: its status, error code and message.
    package struct Refusal: Sendable, Equatable {
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
    /// How long a request's body may take to arrive whole, from its head: the read timeout restarts
    /// with every byte, so a body sent a byte at a time would hold the connection for good.
    private let bodyTimeout: TimeAmount
    private var bodyDeadline: Scheduled<Void>?

    package init(bodyTimeout: TimeAmount = .seconds(10)) {
        self.bodyTimeout = bodyTimeout
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        bodyDeadline?.cancel()
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        let part = unwrapInboundIn(data)
        if case .end = part {
            bodyDeadline?.cancel()
            bodyDeadline = nil
        }
        guard case .head(let request) = part else { return context.fireChannelRead(data) }
        var headerBytes = 0
        for field in request.headerFields { headerBytes += field.name.rawName.utf8.count + field.value.utf8.count }
        let refusal = Self.refusal(targetBytes: request.path?.utf8.count ?? 0, headerBytes: headerBytes, headerFields: request.headerFields.count)
        if let refusal {
            refuse(context, refusal)
            return
        }
        let channel = context.channel
        bodyDeadline = context.eventLoop.scheduleTask(in: bodyTimeout) { channel.close(promise: nil) }
        context.fireChannelRead(data)
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
