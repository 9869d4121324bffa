import CLibPQ
#if canImport(Glibc)
import Glibc
#endif

extension PostgresConnection {
    /// Reads whatever the server has sent, without blocking.
    func consumeInput() throws(PostgresError) {
        guard PQconsumeInput(handle) == 1, PQstatus(handle) == CONNECTION_OK else {
            throw failure(.connectionLost, prefix: "connection lost")
        }
    }

    /// Hands each received notification's payload to `body`, in arrival order,
    /// straight from libpq's buffer (valid only during the call).
    func drainNotifications(_ body: (_ channel: UnsafePointer<CChar>, _ payload: UnsafeBufferPointer<UInt8>, _ senderPID: Int32) -> Void) {
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
