public import NIOCore

/// Runs a task's jobs on a NIO event loop.
///
/// A socket stream's task runs on its channel's event loop, so that a broker
/// delivery wakes that loop once and the write that follows goes straight
/// to the socket, instead of waking a pool thread that then hands the bytes
/// to the loop. A webhook dispatcher's tasks run on the loop of its HTTP
/// connections, so that a request and its answer never change threads.
public final class EventLoopTaskExecutor: TaskExecutor {
    public let eventLoop: any EventLoop

    public init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        eventLoop.execute { job.runSynchronously(on: executor) }
    }
}
