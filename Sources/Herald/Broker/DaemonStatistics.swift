/// What `GET /stats` reports, shared by the daemon and its clients.
public struct DaemonStatistics: Codable, Sendable, Hashable {
    /// The listener's connection state.
    public struct Listener: Codable, Sendable, Hashable {
        /// `connecting`, `listening`, `reconnecting` or `stopped`.
        public var state: String
        /// Why the listener is not listening, when it is not.
        public var reason: String?

        public init(state: String, reason: String? = nil) {
            self.state = state
            self.reason = reason
        }
    }

    public var version: String
    /// Events since the daemon started.
    public var changeCount: UInt64
    /// Events per table, keyed `schema.table`.
    public var tables: [String: UInt64]
    /// Subscribers now, by kind (`sse`, `ndjson`, `stdout`, ...).
    public var subscribers: [String: Int]
    /// Subscribers dropped for falling behind, since start.
    public var overflows: UInt64
    public var uptimeSeconds: Double
    public var listener: Listener

    public init(
        version: String,
        changeCount: UInt64,
        tables: [String: UInt64],
        subscribers: [String: Int],
        overflows: UInt64,
        uptimeSeconds: Double,
        listener: Listener
    ) {
        self.version = version
        self.changeCount = changeCount
        self.tables = tables
        self.subscribers = subscribers
        self.overflows = overflows
        self.uptimeSeconds = uptimeSeconds
        self.listener = listener
    }
}
