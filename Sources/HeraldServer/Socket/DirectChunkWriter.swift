import NIOCore
import NIOHTTP1

/// Writes a stream's batches as HTTP/1.1 chunks straight to the socket,
/// under the HTTP handlers.
///
/// A write through Hummingbird's response writer passes the async writer and
/// four HTTP handlers, and the encoder sends each chunk as three buffers: on
/// this machine that costs more than the system call itself, once per
/// subscriber per batch. This frames the chunk (`size CRLF data CRLF`) in the
/// batch's own buffer and hands it to the handler under the response encoder.
///
/// The response writer still sends the head and ends the body. While the
/// channel is not writable, batches go through the response writer, which
/// waits; since it returns only once its bytes are in the channel, the order
/// holds, and a reader that stops reading still fills its mailbox.
struct DirectChunkWriter: Sendable {
    private let encoderContext: NIOLoopBound<ChannelHandlerContext>
    private let channel: any Channel

    /// `nil` unless called on the channel's event loop with an HTTP/1 response encoder in its pipeline.
    init?(channel: any Channel) {
        guard channel.eventLoop.inEventLoop,
              let context = try? channel.pipeline.syncOperations.context(handlerType: HTTPResponseEncoder.self)
        else { return nil }
        encoderContext = NIOLoopBound(context, eventLoop: channel.eventLoop)
        self.channel = channel
    }

    /// Whether ``write(_:)`` may be used now: when the channel is closed or
    /// not writable, the response writer must take the batch.
    var canWrite: Bool {
        channel.eventLoop.inEventLoop && channel.isActive && channel.isWritable
    }

    /// Writes one chunk framed by ``StreamFormat/frames(_:allocator:asHTTPChunk:)``.
    func write(_ chunk: ByteBuffer) {
        encoderContext.value.writeAndFlush(NIOAny(IOData.byteBuffer(chunk)), promise: nil)
    }
}
