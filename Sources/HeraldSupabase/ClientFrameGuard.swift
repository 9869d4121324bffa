import HeraldCluster
import Logging
import NIOCore
import NIOHTTP1
import NIOWebSocket

/// Stands right behind a realtime socket's frame decoder, where every frame
/// a client sends passes, control frames included (the WebSocket library
/// shows its extensions only message frames). It closes the socket at the
/// first frame the client sent unmasked, as RFC 6455 §5.1 asks of a server:
/// a close frame with 1002 (protocol error), and nothing of that frame or
/// after it is read.
///
/// It also counts the fragments of the message the client is sending in the
/// socket's ``SocketBudget`` until its last frame comes, and closes the
/// socket with 1008 (policy violation) at a fragment past the budget, with
/// 1009 (message too big) once the fragments pass the largest message, and
/// with 1002 at a continuation that continues nothing or a message begun
/// inside another: the library closed all three with 1000.
final class ClientFrameGuard: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let logger: Logger
    private let budget: SocketBudget
    /// `realtime.broadcast.max_bytes` and the envelope: the largest message, fragmented or not.
    private let maximumMessageSize: Int
    /// Set once the socket is being closed: later frames are dropped unread.
    private var closing = false
    /// The bytes of the fragmented message begun and not finished; nil between messages.
    private var unfinished: Int?

    init(logger: Logger, budget: SocketBudget, maximumMessageSize: Int) {
        self.logger = logger
        self.budget = budget
        self.maximumMessageSize = maximumMessageSize
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        let frame = unwrapInboundIn(data)
        guard frame.maskKey != nil else {
            logger.debug("closing a realtime socket that sent an unmasked frame", metadata: ["opcode": "\(frame.opcode)"])
            return close(context, code: .protocolError)
        }
        switch frame.opcode {
        case .text, .binary, .continuation:
            // RFC 6455 §5.4: a continuation continues a message begun, and no message begins inside another.
            guard (frame.opcode == .continuation) == (unfinished != nil) else {
                logger.debug("closing a realtime socket whose fragments are out of order", metadata: ["opcode": "\(frame.opcode)"])
                return close(context, code: .protocolError)
            }
            let length = (unfinished ?? 0) + frame.length
            guard length <= maximumMessageSize else {
                logger.debug("closing a realtime socket whose message passed the largest", metadata: ["bytes": "\(length)"])
                return close(context, code: .messageTooLarge)
            }
            unfinished = frame.fin ? nil : length
            // The library holds a message's fragments until its last frame, then hands the message on whole.
            if frame.fin {
                budget.finishMessage()
            } else if !budget.holdFragment(frame.length) {
                logger.notice("closing a realtime socket whose unfinished message passed its budget (realtime.max_queued_bytes)", metadata: [
                    "held": "\(budget.heldBytes)", "max_queued_bytes": "\(budget.maximumBytes)",
                ])
                return close(context, code: .policyViolation)
            }
        default:
            break
        }
        context.fireChannelRead(data)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        budget.finishMessage()
    }

    /// Sends a close frame with `code`, then closes without waiting for the client's.
    private func close(_ context: ChannelHandlerContext, code: WebSocketErrorCode) {
        closing = true
        var data = context.channel.allocator.buffer(capacity: 2)
        data.write(webSocketErrorCode: code)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data))).whenComplete { _ in
            channel.close(promise: nil)
        }
    }

    /// Puts a ``ClientFrameGuard`` behind the frame decoder. Added to an
    /// upgrading connection, after NIO's upgrade handler: the decoder comes
    /// later, when the upgrade completes, and the frames that arrived
    /// meanwhile are held until this has put the guard in place.
    final class Installer: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = Never

        private let logger: Logger
        private let budget: SocketBudget
        private let maximumMessageSize: Int

        init(logger: Logger, budget: SocketBudget, maximumMessageSize: Int) {
            self.logger = logger
            self.budget = budget
            self.maximumMessageSize = maximumMessageSize
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if let upgrade = event as? HTTPServerUpgradeEvents, case .upgradeComplete = upgrade {
                do {
                    let decoder = try context.pipeline.syncOperations.handler(type: ByteToMessageHandler<WebSocketFrameDecoder>.self)
                    try context.pipeline.syncOperations.addHandler(ClientFrameGuard(logger: logger, budget: budget, maximumMessageSize: maximumMessageSize), position: .after(decoder))
                } catch {
                    // Without the guard the socket would accept unmasked frames: it does not go on.
                    logger.error("could not guard a realtime socket's frames", metadata: ["error": "\(error)"])
                    context.close(promise: nil)
                }
                context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            }
            context.fireUserInboundEventTriggered(event)
        }
    }
}
