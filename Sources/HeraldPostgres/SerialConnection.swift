import Dispatch

/// One libpq connection for occasional queries from async code.
///
/// libpq blocks, so queries run on a serial queue of their own, never on the
/// async runtime's threads. The connection opens on first use and again after
/// a failure.
public final class SerialConnection: Sendable {
    private let connectionString: ConnectionString
    private let applicationName: String
    private let queue: DispatchQueue
    private let slot = ConnectionSlot()

    public init(_ connectionString: ConnectionString, applicationName: String) {
        self.connectionString = connectionString
        self.applicationName = applicationName
        queue = DispatchQueue(label: applicationName)
    }

    /// Runs `body` with the connection on the queue.
    public func run<Value: Sendable>(
        _ body: @escaping @Sendable (LibpqConnection) throws(LibpqError) -> Value
    ) async throws(LibpqError) -> Value {
        let result: Result<Value, LibpqError> = await withCheckedContinuation { continuation in
            queue.async {
                continuation.resume(returning: Result { () throws(LibpqError) in try self.runOnQueue(body) })
            }
        }
        return try result.get()
    }

    /// Runs `body` on the open connection, or on a new one. A connection
    /// found broken (the server restarted, or the backend was terminated
    /// while idle) is replaced and `body` runs once more: every caller's body
    /// is a read, an idempotent write or one transaction, so running it twice is safe.
    private func runOnQueue<Value>(_ body: (LibpqConnection) throws(LibpqError) -> Value) throws(LibpqError) -> Value {
        if let open = slot.value {
            do {
                return try body(open)
            } catch where error.code == .connectionLost {
                slot.value = nil
            } catch {
                if error.code != .queryFailed { slot.value = nil }
                throw error
            }
        }
        let connection = try LibpqConnection.connect(connectionString, timeout: .seconds(5), applicationName: applicationName)
        slot.value = connection
        do {
            return try body(connection)
        } catch {
            if error.code != .queryFailed { slot.value = nil }
            throw error
        }
    }
}

/// The connection of a ``SerialConnection``.
///
/// `@unchecked Sendable` because the invariant is kept by hand: it is read and
/// written only from the owner's serial queue, so the connection is never
/// used from two threads at once.
private final class ConnectionSlot: @unchecked Sendable {
    var value: LibpqConnection?
}
