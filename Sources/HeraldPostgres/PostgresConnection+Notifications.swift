import CLibPQ
#if canImport(Glibc)
import Glibc
#endif

extension PostgresConnection {
    /// Waits for input (at most until `deadline`), reads everything available
    /// and hands each notification to `body` in arrival order.
    ///
    /// The payload points into libpq's buffer and is valid only during the call.
    /// Throws `timedOut` at the deadline, `connectionLost` when the connection
    /// breaks, and `stopped` when the connection's wake signal fires.
    /// Whether the server has sent data that has not been read yet.
    var hasWaitingInput: Bool {
        WakeSignal.wait(for: socket, wake: nil, until: .now) == .ready
    }

    public func receiveNotifications(
        until deadline: ContinuousClock.Instant? = nil,
        _ body: (_ channel: UnsafePointer<CChar>, _ payload: UnsafeBufferPointer<UInt8>, _ senderPID: Int32) -> Void
    ) throws(PostgresError) {
        try waitForSocket(events: Int16(POLLIN), deadline: deadline, action: "waiting for notifications")
        guard PQconsumeInput(handle) == 1, PQstatus(handle) == CONNECTION_OK else {
            throw failure(.connectionLost, prefix: "connection lost")
        }
        while let notification = PQnotifies(handle) {
            defer { PQfreemem(notification) }
            let extra = notification.pointee.extra!
            let payload = UnsafeBufferPointer(
                start: UnsafeRawPointer(extra).assumingMemoryBound(to: UInt8.self),
                count: strlen(extra)
            )
            body(notification.pointee.relname, payload, notification.pointee.be_pid)
        }
    }
}
