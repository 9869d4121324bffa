#if canImport(Glibc)
public import Glibc
public import HeraldConsole
public import HeraldHTTP
#endif

/// Settings of the Unix-socket server.
public struct SocketConfiguration: Sendable, Equatable {
    /// Where the socket file lives. Default: see ``defaultPath(environment:)``.
    public var path: String
    /// Permissions of the socket file. Default 0660: owner and group may connect.
    public var mode: mode_t
    /// Group to own the socket file, so its members may connect. Default: the daemon's group.
    public var group: String?
    /// Concurrent event streams allowed; more get 503. Default 10,000.
    public var maximumSubscribers: Int
    /// Each key's, user's and address's share of ``maximumSubscribers``.
    public var streamShares: StreamShares
    /// Open connections allowed, streaming or not; one beyond gets 503 at
    /// its first request. Default: `maximumSubscribers` + 128.
    public var maximumConnections: Int
    /// A connection that has not sent a whole request head within this long,
    /// or sits idle this long between requests, is closed (slow or silent
    /// clients); open streams are never idle. Default 10 s.
    public var idleTimeout: Duration
    /// Events a stream may fall behind live before it reads on from the
    /// broker's history instead; `event: overflow` ends it only once it falls
    /// behind the history too. Default 4096.
    public var mailboxCapacity: Int
    /// Bytes of events (rows as held in memory) a stream may fall behind live
    /// before it reads on from the history, as past ``mailboxCapacity``: a
    /// count alone let a client that does not read hold thousands of large
    /// rows. Default 16 MiB.
    public var mailboxBytes: Int
    /// How often idle streams get a heartbeat comment. Default 15 s.
    public var heartbeatInterval: Duration
    /// The most writes per second to spend on all streams together; nil (the
    /// default): no ceiling.
    ///
    /// Streams are written at once while their event loop has headroom, and
    /// paced only while writing keeps it busy (``WritePacing``). With a rate,
    /// a stream is also written at most every `open streams / writeRate`
    /// seconds, and events that arrive sooner go out together in its next
    /// write: at 50,000, 2 ms apart with 100 streams and 20 ms with 1000.
    public var writeRate: Int?
    /// The live console (`console:`), served at `/console` and, with
    /// `console.listen`, on TCP too. Default: off.
    public var console: ConsoleConfiguration?
    /// The network listener (`http:` and `tls:`), which serves this API to
    /// other machines too. Default: off.
    public var network: NetworkConfiguration?

    public init(
        path: String,
        mode: mode_t = 0o660,
        group: String? = nil,
        maximumSubscribers: Int = 10_000,
        streamShares: StreamShares = StreamShares(),
        maximumConnections: Int? = nil,
        idleTimeout: Duration = .seconds(10),
        mailboxCapacity: Int = 4096,
        mailboxBytes: Int = 16 << 20,
        heartbeatInterval: Duration = .seconds(15),
        writeRate: Int? = nil,
        console: ConsoleConfiguration? = nil,
        network: NetworkConfiguration? = nil
    ) {
        self.path = path
        self.mode = mode
        self.group = group
        self.maximumSubscribers = maximumSubscribers
        self.streamShares = streamShares
        self.maximumConnections = maximumConnections ?? maximumSubscribers + 128
        self.idleTimeout = idleTimeout
        self.mailboxCapacity = mailboxCapacity
        self.mailboxBytes = mailboxBytes
        self.heartbeatInterval = heartbeatInterval
        self.writeRate = writeRate
        self.console = console
        self.network = network
    }

    /// How many streams (`/events` and `/queries`) one holder may have open
    /// over the network, so that no key, user or address takes
    /// ``maximumSubscribers`` from the rest; 0 turns a limit off. The Unix
    /// socket's peers are local, and one of them is often a proxy for many
    /// clients: the access rules and the daemon's limit apply there.
    public struct StreamShares: Sendable, Hashable {
        /// Key `socket.max_subscribers_per_key`: streams of one shared
        /// credential (a key of `realtime.keys`, or a token without `sub`). Default 5,000.
        public var perKey: Int
        /// Key `socket.max_subscribers_per_user`: streams of one token subject. Default 100.
        public var perUser: Int
        /// Key `socket.max_subscribers_per_address`: streams from one peer
        /// address, but for those in `http.proxies`. Default 1,000.
        public var perAddress: Int

        /// Key `socket.max_conditions_per_key`: the cost of the `where=`
        /// conditions that one shared credential's streams hold together
        /// (1 a comparison, and 1 for each 64 characters but `%` of a `like`
        /// pattern): each event of their tables is checked against every one.
        /// Default 20,000: four for each of 5,000 streams.
        public var conditionsPerKey: Int
        /// Key `socket.max_conditions_per_user`: the same for one token
        /// subject. Default 2,048: rows of 2,000 characters cost the daemon
        /// about 6 ms of checks each at that limit.
        public var conditionsPerUser: Int
        /// Key `socket.max_conditions_per_address`: the same for one peer
        /// address, but for those in `http.proxies`. Default 20,000.
        public var conditionsPerAddress: Int

        public init(
            perKey: Int = 5_000, perUser: Int = 100, perAddress: Int = 1_000,
            conditionsPerKey: Int = 20_000, conditionsPerUser: Int = 2_048, conditionsPerAddress: Int = 20_000
        ) {
            self.perKey = perKey
            self.perUser = perUser
            self.perAddress = perAddress
            self.conditionsPerKey = conditionsPerKey
            self.conditionsPerUser = conditionsPerUser
            self.conditionsPerAddress = conditionsPerAddress
        }
    }

    /// How long a stream waits after a write before its next one, with
    /// `openStreams` streams open; `nil` without a ``writeRate``.
    public func writeSpacing(openStreams: Int) -> Duration? {
        writeRate.map { .seconds(openStreams) / $0 }
    }

    /// `$RUNTIME_DIRECTORY/pgherald.sock` under systemd, else
    /// `$XDG_RUNTIME_DIR/pgherald.sock`, else `/tmp/pgherald-UID/pgherald.sock`: one path for
    /// serve, tail, status and curl whatever directory each runs in, for root (which often has
    /// no `XDG_RUNTIME_DIR`) as for any other user.
    public static func defaultPath(environment: [String: String], userID: uid_t = getuid()) -> String {
        // systemd may list several runtime directories, separated by colons.
        if let runtime = environment["RUNTIME_DIRECTORY"]?.split(separator: ":").first, !runtime.isEmpty {
            return "\(runtime)/pgherald.sock"
        }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            return "\(runtime)/pgherald.sock"
        }
        return "\(privateDirectory(userID: userID))/pgherald.sock"
    }

    /// The folder of the last default, which serve makes (mode 0700) when it is missing, as tmux does
    /// for its own: only its user may reach the socket in it.
    public static func privateDirectory(userID: uid_t = getuid()) -> String {
        "/tmp/pgherald-\(userID)"
    }
}
