import HTTPTypes
package import NIOCore
package import NIOHTTPTypes

/// Takes `Connection` out of the response heads of an HTTP/2 stream.
///
/// The handlers the streams share with HTTP/1.1 ask for `Connection: close`
/// at the end of a stream or an error; HTTP/2 forbids connection-specific
/// fields, and NIO would reset the stream for one.
package final class HTTP2HeadTrimmer: ChannelOutboundHandler, RemovableChannelHandler {
    package typealias OutboundIn = HTTPResponsePart
    package typealias OutboundOut = HTTPResponsePart

    package init() {}

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .head(var head) = unwrapOutboundIn(data), head.headerFields[.connection] != nil else {
            return context.write(data, promise: promise)
        }
        head.headerFields[.connection] = nil
        context.write(wrapOutboundOut(.head(head)), promise: promise)
    }
}
