#if canImport(Glibc)
public import Glibc
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
    /// How often idle streams get a heartbeat comment. Default 15 s.
    public var heartbeatInterval: Duration
    /// Writes per second the socket aims to spend on all streams together. Default 50,000.
    ///
    /// Key `socket.write_rate`: how often a stream may be written. Default
    /// ``WritePacing/adaptive`` (`auto`).
    public var writePacing: WritePacing

    public init(
        path: String,
        mode: mode_t = 0o660,
        group: String? = nil,
        maximumSubscribers: Int = 10_000,
        maximumConnections: Int? = nil,
        idleTimeout: Duration = .seconds(10),
        mailboxCapacity: Int = 4096,
        heartbeatInterval: Duration = .seconds(15),
        writePacing: WritePacing = .adaptive
    ) {
        self.path = path
        self.mode = mode
        self.group = group
        self.maximumSubscribers = maximumSubscribers
        self.maximumConnections = maximumConnections ?? maximumSubscribers + 128
        self.idleTimeout = idleTimeout
        self.mailboxCapacity = mailboxCapacity
        self.heartbeatInterval = heartbeatInterval
        self.writePacing = writePacing
    }

    /// How long a stream waits after a write before its next one, with
    /// `openStreams` streams open and its event loop running `loopLag` late; nil: no wait.
    public func writeSpacing(openStreams: Int, loopLag: Duration = .zero) -> Duration? {
        writePacing.spacing(openStreams: openStreams, loopLag: loopLag)
    }

    /// `$RUNTIME_DIRECTORY/pgherald.sock` under systemd, else
    /// `$XDG_RUNTIME_DIR/pgherald.sock`, else `./pgherald.sock`.
    public static func defaultPath(environment: [String: String]) -> String {
        // systemd may list several runtime directories, separated by colons.
        if let runtime = environment["RUNTIME_DIRECTORY"]?.split(separator: ":").first, !runtime.isEmpty {
            return "\(runtime)/pgherald.sock"
        }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            return "\(runtime)/pgherald.sock"
        }
        return "./pgherald.sock"
    }
}
