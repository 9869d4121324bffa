import NIOCore

/// Runs a task's jobs on a NIO event loop.
///
/// A stream's task runs on its channel's event loop, so that a broker
/// delivery wakes that loop once and the write that follows goes straight
/// to the socket, instead of waking a pool thread that then hands the bytes
/// to the loop.
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        eventLoop.execute { job.runSynchronously(on: executor) }
    }
}
