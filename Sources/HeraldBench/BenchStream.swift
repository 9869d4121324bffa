import NIOCore

/// One subscriber of the load client, living on one event loop.
protocol BenchStream: AnyObject {
    var record: StreamRecord { get }
    /// Whether the daemon refused or broke the stream in a way a resume cannot mend.
    var failure: String? { get }
    /// Opens the stream; the future completes once it is subscribed.
    func connect() -> EventLoopFuture<Void>
    /// No more reconnects.
    func stop()
}
