public import HeraldHTTP
public import HeraldRealtime

/// The `realtime:` section: Supabase Realtime's `postgres_changes` protocol
/// at `/realtime/v1/websocket`, on the Unix socket always and on TCP when asked.
public struct RealtimeConfiguration: Sendable, Equatable {
    /// `HOST:PORT` of a TCP listener, such as `127.0.0.1:4000`. Default nil:
    /// the Unix socket only. TCP needs ``credentials``: every TCP client
    /// presents a key or token.
    public var listen: String?
    /// Static keys and the token secret. Default: none, so only Unix-socket
    /// peers connect, each seeing what the `access:` section grants it.
    public var credentials: RealtimeCredentials
    /// Events a channel may fall behind before it is ended with `phx_error`
    /// (clients then rejoin). Default 4096.
    public var mailboxCapacity: Int
    /// Largest message a client may send, fragmented or not. Default 1 MiB here; from a file,
    /// `realtime.broadcast.max_bytes` and 64 KiB for the rest of the message (128 KiB in all).
    public var maximumMessageSize: Int
    /// Channels open at once across all sockets; a join beyond gets an error reply. Default 10,000.
    public var maximumChannels: Int
    /// TCP connections open at once. Default 10,128.
    public var maximumConnections: Int
    /// How long the daemon remembers where a channel stopped after its socket
    /// dropped, so that the same caller rejoining the same topic with the
    /// same bindings gets what it missed. Default 2 minutes; zero turns it off.
    public var resumeWindow: Duration
    /// Key `realtime.broadcast.max_bytes`: the largest broadcast payload a client or the REST endpoint may send. Default 64 KiB.
    public var broadcastMaximumBytes: Int
    /// Key `realtime.broadcast.max_per_second`: broadcasts one socket (or one REST caller) may send a second. Default 100.
    public var broadcastMaximumPerSecond: Int
    /// Key `realtime.max_queued_bytes`: the bytes one socket may hold, the
    /// broadcasts and presence waiting across its channels and the message
    /// its client is sending while unfinished; a channel misses a frame that
    /// would pass it less room for one ``maximumMessageSize`` message, as it
    /// does one past its 1,024 frames. Default 8 MiB.
    public var maximumQueuedBytes: Int
    /// Connections and channels per key and per token subject, so that no one of them takes
    /// ``maximumConnections`` or ``maximumChannels`` from the rest (see ``ConsumerLedger/Limits``).
    public var consumerLimits: ConsumerLedger.Limits
    /// `realtime.max_connections_per_address` and `realtime.proxies`: one client's share of the TCP
    /// listener's ``maximumConnections``.
    public var addressLimit: AddressLimit

    public init(
        listen: String? = nil,
        credentials: RealtimeCredentials = .init(),
        mailboxCapacity: Int = 4096,
        maximumMessageSize: Int = 1 << 20,
        maximumChannels: Int = 10_000,
        maximumConnections: Int = 10_128,
        resumeWindow: Duration = .seconds(120),
        broadcastMaximumBytes: Int = 65_536,
        broadcastMaximumPerSecond: Int = 100,
        consumerLimits: ConsumerLedger.Limits = .init(),
        addressLimit: AddressLimit = .init(),
        maximumQueuedBytes: Int = 8 << 20
    ) {
        self.addressLimit = addressLimit
        self.listen = listen
        self.credentials = credentials
        self.mailboxCapacity = mailboxCapacity
        self.maximumMessageSize = maximumMessageSize
        self.maximumChannels = maximumChannels
        self.maximumConnections = maximumConnections
        self.resumeWindow = resumeWindow
        self.broadcastMaximumBytes = broadcastMaximumBytes
        self.broadcastMaximumPerSecond = broadcastMaximumPerSecond
        self.maximumQueuedBytes = maximumQueuedBytes
        self.consumerLimits = consumerLimits
    }
}
