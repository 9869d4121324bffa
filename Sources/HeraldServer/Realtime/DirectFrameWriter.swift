import NIOCore
import NIOWebSocket

/// Writes a channel's change events as WebSocket text frames straight to the
/// socket, under the frame encoder: one buffer and one flush for a whole
/// batch, where the WebSocket writer takes a task hop and a flush per frame.
///
/// As with ``DirectChunkWriter``, while the channel is not writable the
/// frames go through the WebSocket writer, which waits; it returns only once
/// its frame is in the channel, so the order holds.
struct DirectFrameWriter: Sendable {
    private let encoderContext: NIOLoopBound<ChannelHandlerContext>
    private let channel: any Channel

    /// `nil` unless called on the channel's event loop with a WebSocket frame encoder in its pipeline.
    init?(channel: any Channel) {
        guard channel.eventLoop.inEventLoop,
              let context = try? channel.pipeline.syncOperations.context(handlerType: WebSocketFrameEncoder.self)
        else { return nil }
        encoderContext = NIOLoopBound(context, eventLoop: channel.eventLoop)
        self.channel = channel
    }

    var canWrite: Bool {
        channel.eventLoop.inEventLoop && channel.isActive && channel.isWritable
    }

    /// Appends one unmasked text frame holding `message`, as a server sends it.
    static func appendTextFrame(_ message: [UInt8], to buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt8(0x81))
        switch message.count {
        case ..<126:
            buffer.writeInteger(UInt8(message.count))
        case ...0xFFFF:
            buffer.writeInteger(UInt8(126))
            buffer.writeInteger(UInt16(message.count))
        default:
            buffer.writeInteger(UInt8(127))
            buffer.writeInteger(UInt64(message.count))
        }
        buffer.writeBytes(message)
    }

    /// Writes frames built by ``appendTextFrame(_:to:)``.
    func write(_ frames: ByteBuffer) {
        encoderContext.value.writeAndFlush(NIOAny(IOData.byteBuffer(frames)), promise: nil)
    }
}
