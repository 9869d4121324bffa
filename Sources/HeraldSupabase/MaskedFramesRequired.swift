import HummingbirdWebSocket
import NIOWebSocket

/// Refuses a data frame that a client sent unmasked, as RFC 6455 §5.1 asks
/// of a server: the WebSocket library then sends a close frame and closes
/// the connection before the frame's message is read. (It closes with 1011
/// for any error not its own; the RFC leaves the code to the server.)
/// Applied to every connection without negotiation; the library hands
/// extensions text, binary and continuation frames, which are all that carry
/// a client's messages.
struct MaskedFramesRequired: WebSocketExtension {
    /// Thrown for the first unmasked frame.
    struct UnmaskedFrame: Error, CustomStringConvertible {
        var description: String { "a client sent an unmasked frame; clients must mask every frame (RFC 6455 §5.1)" }
    }

    let name = "pgherald-masked-frames"

    func processReceivedFrame(_ frame: WebSocketFrame, context: WebSocketExtensionContext) throws -> WebSocketFrame {
        guard frame.maskKey != nil else {
            context.logger.debug("closing a realtime socket that sent an unmasked frame")
            throw UnmaskedFrame()
        }
        return frame
    }

    func processFrameToSend(_ frame: WebSocketFrame, context: WebSocketExtensionContext) -> WebSocketFrame {
        frame
    }

    func shutdown() async {}
}
