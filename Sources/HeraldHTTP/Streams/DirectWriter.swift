package import NIOCore
package import NIOHTTP1
package import NIOWebSocket

/// Writes bytes the caller has already framed straight to the socket, under
/// the pipeline's `Encoder`.
///
/// The handlers above the encoder (and, for a WebSocket, Hummingbird's async
/// writer with its task hop) cost more than the system call itself when a
/// batch is written to each of many subscribers. A stream frames a whole
/// batch in one buffer and hands it to the handler under the encoder instead.
///
/// What comes first and last (the response head, the end of the body) still
/// goes through the handlers. While the channel is not writable the caller
/// must wait (``EventStreamHandler``) or use its async writer, which waits;
/// either way a reader that stops reading fills its mailbox.
package struct DirectWriter<Encoder: ChannelHandler>: Sendable {
    private let encoderContext: NIOLoopBound<ChannelHandlerContext>
    private let channel: any Channel

    /// `nil` unless called on the channel's event loop with an `Encoder` in its pipeline.
    package init?(channel: any Channel) {
        guard channel.eventLoop.inEventLoop,
              let context = try? channel.pipeline.syncOperations.context(handlerType: Encoder.self)
        else { return nil }
        encoderContext = NIOLoopBound(context, eventLoop: channel.eventLoop)
        self.channel = channel
    }

    /// Whether ``write(_:)`` may be used now: when the channel is closed or
    /// not writable, the async writer must take the batch.
    package var canWrite: Bool {
        channel.eventLoop.inEventLoop && channel.isActive && channel.isWritable
    }

    /// Writes bytes framed for the wire beneath `Encoder`.
    package func write(_ bytes: ByteBuffer) {
        encoderContext.value.writeAndFlush(NIOAny(IOData.byteBuffer(bytes)), promise: nil)
    }
}

/// A stream's batches as HTTP/1.1 chunks framed by
/// ``StreamFormat/frames(_:allocator:asHTTPChunk:)``, under the response encoder.
package typealias DirectChunkWriter = DirectWriter<HTTPResponseEncoder>

/// A realtime channel's change events as WebSocket text frames built by
/// ``DirectWriter/appendTextFrame(_:to:)``, under the frame encoder.
package typealias DirectFrameWriter = DirectWriter<WebSocketFrameEncoder>

extension DirectWriter where Encoder == WebSocketFrameEncoder {
    /// Appends one unmasked text frame holding `message`, as a server sends it.
    package static func appendTextFrame(_ message: [UInt8], to buffer: inout ByteBuffer) {
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
}
