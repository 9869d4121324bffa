/// The network listener (`http:` and `tls:`): the socket's API, the
/// Supabase endpoint and the console, for apps on other machines, on one
/// port. Off by default: on once `http.listen` names an address.
public struct NetworkConfiguration: Sendable, Equatable {
    /// `http.listen`: one or more `HOST:PORT` addresses.
    public var listen: [ListenAddress]
    /// `tls.cert_file` and `tls.key_file`; nil: plain HTTP, which is allowed
    /// on loopback addresses, or elsewhere with ``allowsPlaintext``.
    public var tls: TLSFiles?
    /// `http.plaintext: true`: serve plain HTTP on addresses other than
    /// loopback, for a proxy in front that terminates TLS. Default false.
    public var allowsPlaintext: Bool
    /// `http.cors.origins`: the browser origins (`https://app.example.com`)
    /// whose pages may read the API. Default: none.
    public var corsOrigins: [String]
    /// `http.max_connections`: open connections allowed; one beyond is
    /// closed at once. Default 10,000.
    public var maximumConnections: Int
    /// How long each step of a connection may take before it is closed.
    public var timeouts: Timeouts
    /// `http.max_connections_per_address` and `http.proxies`: one client's share of ``maximumConnections``.
    public var addressLimit: AddressLimit

    public init(
        listen: [ListenAddress], tls: TLSFiles? = nil, allowsPlaintext: Bool = false, corsOrigins: [String] = [], maximumConnections: Int = 10_000,
        timeouts: Timeouts = Timeouts(), addressLimit: AddressLimit = AddressLimit()
    ) {
        self.addressLimit = addressLimit
        self.listen = listen
        self.tls = tls
        self.allowsPlaintext = allowsPlaintext
        self.corsOrigins = corsOrigins
        self.maximumConnections = maximumConnections
        self.timeouts = timeouts
    }

    /// The time a connection may hold one of `http.max_connections` without
    /// doing its part: each is a deadline, which a client sending a byte at a
    /// time does not push back.
    public struct Timeouts: Sendable, Equatable {
        /// `http.handshake_timeout`: from the accept to the end of the TLS
        /// handshake. Default 10 s.
        public var handshake: Duration
        /// `http.request_timeout`: for a request's head to arrive whole, from
        /// the handshake's end or the previous answer's; an HTTP/1.1
        /// connection that sends nothing is closed after it. On HTTP/2, for
        /// each stream's request. Default 10 s.
        public var request: Duration
        /// `http.idle_timeout`: how long an HTTP/2 connection may stay with no
        /// open stream; it then gets a GOAWAY and is closed. Default 60 s.
        public var idle: Duration

        public init(handshake: Duration = .seconds(10), request: Duration = .seconds(10), idle: Duration = .seconds(60)) {
            self.handshake = handshake
            self.request = request
            self.idle = idle
        }
    }

    /// The PEM files of the certificate chain and its private key.
    public struct TLSFiles: Sendable, Equatable {
        public var certificatePath: String
        public var keyPath: String

        public init(certificatePath: String, keyPath: String) {
            self.certificatePath = certificatePath
            self.keyPath = keyPath
        }
    }

    /// Whether `address` is reachable only from this machine.
    public static func isLoopback(_ address: ListenAddress) -> Bool {
        address.host == "localhost" || address.host == "::1" || address.host.hasPrefix("127.")
    }

    /// The scheme clients use: `https` with TLS.
    public var scheme: String { tls == nil ? "http" : "https" }
}
