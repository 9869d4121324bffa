public import Hummingbird
public import NIOCore

/// The request context of the socket server; it keeps the connection's
/// channel so that a stalled stream can be closed.
public struct SocketRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}
