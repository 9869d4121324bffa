import CLibPQ
#if canImport(Glibc)
import Glibc
#endif

extension LibpqConnection {
    /// A notification as libpq holds it; the pointers are valid only during the callback.
    public typealias NotificationHandler = (
        _ channel: UnsafePointer<CChar>, _ payload: UnsafeBufferPointer<UInt8>, _ senderPID: Int32
    ) -> Void

    /// Waits for input (at most until `deadline`), reads everything available,
    /// and hands each notification to `body` in arrival order.
    ///
    /// Throws `timedOut` at the deadline, `connectionLost` when the connection
    /// breaks, and `stopped` when the connection's wake signal fires.
    public func receiveNotifications(
        until deadline: ContinuousClock.Instant? = nil,
        _ body: NotificationHandler
    ) throws(LibpqError) {
        try awaitInput(until: deadline)
        takeNotifications(body)
    }

    /// Waits until the server has sent something, then reads it into libpq's buffer.
    public func awaitInput(until deadline: ContinuousClock.Instant? = nil) throws(LibpqError) {
        try waitForSocket(events: Int16(POLLIN), deadline: deadline, action: "waiting for notifications")
        try readInput()
    }

    /// Reads whatever the server has sent, without waiting.
    func readInput() throws(LibpqError) {
        guard PQconsumeInput(handle) == 1, PQstatus(handle) == CONNECTION_OK else {
            throw failure(.connectionLost, prefix: "connection lost")
        }
    }

    /// Hands at most `limit` of the notifications already read to `body`, in
    /// arrival order; the rest wait for the next call.
    /// - Returns: how many were handed over.
    @discardableResult
    public func takeNotifications(limit: Int = .max, _ body: NotificationHandler) -> Int {
        var taken = 0
        while taken < limit, let notification = PQnotifies(handle) {
            defer { PQfreemem(notification) }
            let extra = notification.pointee.extra!
            let payload = UnsafeBufferPointer(
                start: UnsafeRawPointer(extra).assumingMemoryBound(to: UInt8.self),
                count: strlen(extra)
            )
            body(notification.pointee.relname, payload, notification.pointee.be_pid)
            taken += 1
        }
        return taken
    }

    /// Whether the server has sent data that has not been read yet.
    var hasWaitingInput: Bool {
        WakeSignal.wait(for: socket, wake: nil, until: .now) == .ready
    }
}
