public import AsyncHTTPClient
public import Foundation
import HeraldSupport
public import Herald
public import Logging
import NIOCore
import NIOFoundationCompat
import Synchronization

/// A client for a pgherald daemon: on its Unix socket, or over the network
/// (`http.listen`) with a user's token.
///
/// ```swift
/// let client = HeraldClient(socketPath: "/run/pgherald/pgherald.sock")
/// for try await event in client.events(EventFilter(tables: [TableName(name: "course")])) {
///     print(event.count, event.operation, event.table)
/// }
///
/// let remote = HeraldClient(url: URL(string: "https://herald.example.com")!) { try await session.accessToken }
/// ```
///
/// Event streams reconnect by themselves when the daemon restarts or the
/// stream is dropped, with capped exponential backoff, and resume after the
/// last event received (`Last-Event-ID`).
public struct HeraldClient: Sendable {
    /// Gives the token for the next connection; called before each
    /// connection, so that a refreshed token is used at the next reconnect.
    public typealias TokenProvider = @Sendable () async throws -> String

    /// Client settings.
    public struct Configuration: Sendable {
        /// Where the daemon listens.
        public enum Endpoint: Sendable, CustomStringConvertible {
            /// Its Unix socket, on this machine; the access rules decide by who the process is.
            case unixSocket(path: String)
            /// Its network listener: `https://HOST:PORT`, or `http://` to a loopback address.
            case url(URL)

            public var description: String {
                switch self {
                case .unixSocket(let path): path
                case .url(let url): url.absoluteString
                }
            }
        }

        public var endpoint: Endpoint
        /// The token sent as `Authorization: Bearer` over the network; nil on the socket.
        public var token: TokenProvider?
        /// Whether ``token`` may give a new token after a refusal: then a 401
        /// is reported and retried with backoff, rather than ending the stream.
        public var tokenRefreshes: Bool
        /// Delays between reconnect attempts. Default 100 ms doubling to 5 s.
        public var backoff: BackoffPolicy

        public init(
            socketPath: String,
            backoff: BackoffPolicy = Configuration.defaultBackoff
        ) {
            self.endpoint = .unixSocket(path: socketPath)
            self.token = nil
            self.tokenRefreshes = false
            self.backoff = backoff
        }

        /// - Parameters:
        ///   - token: called before each connection; nil sends none.
        ///   - tokenRefreshes: whether a refused token may be followed by a good one.
        public init(url: URL, token: TokenProvider?, tokenRefreshes: Bool, backoff: BackoffPolicy = Configuration.defaultBackoff) {
            self.endpoint = .url(url)
            self.token = token
            self.tokenRefreshes = tokenRefreshes
            self.backoff = backoff
        }

        public static let defaultBackoff = BackoffPolicy(initialDelay: .milliseconds(100), maximumDelay: .seconds(5))
    }

    /// The process-wide HTTP client for daemon sockets. A stream that brings
    /// nothing, not even a heartbeat, for 45 s (three heartbeats) is
    /// considered dead and reconnected. Each open stream holds a connection,
    /// so the pool allows many more than AsyncHTTPClient's default of 8.
    public static let sharedHTTPClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: httpConfiguration)

    /// The shared client's settings, which ``httpClient(trustingCertificateAuthoritiesIn:)`` starts from.
    static var httpConfiguration: HTTPClient.Configuration {
        HTTPClient.Configuration(
            timeout: .init(connect: .seconds(5), read: .seconds(45)),
            connectionPool: .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 1024)
        )
    }

    public let configuration: Configuration
    let httpClient: HTTPClient
    let logger: Logger
    /// The token the daemon refused last: a provider that gives it again has no other.
    let refusedToken = RefusedToken()

    /// Shared by the copies of a client, as its streams are.
    final class RefusedToken: Sendable {
        private let token = Mutex<String?>(nil)

        /// Records the token `request` presented, which the daemon answered with 401.
        func record(_ request: HTTPClientRequest) {
            let presented = request.headers.first(name: "Authorization").map { String($0.dropFirst("Bearer ".count)) }
            token.withLock { $0 = presented }
        }

        func isRefused(_ candidate: String) -> Bool { token.withLock { $0 == candidate } }
    }

    /// - Parameter logger: where the client logs its reconnects; silent by
    ///   default, since ``Message/unreachable(_:)`` and ``Message/reconnected``
    ///   tell the caller what happened.
    public init(
        configuration: Configuration,
        httpClient: HTTPClient = sharedHTTPClient,
        logger: Logger = Logger(label: "pgherald-client", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.configuration = configuration
        self.httpClient = httpClient
        self.logger = logger
    }

    public init(socketPath: String) {
        self.init(configuration: Configuration(socketPath: socketPath))
    }

    /// A client of the daemon at `url` (`https://HOST:PORT`) with a fixed
    /// token: a key or a JWT. A refused or expired token ends streams with
    /// ``HeraldClientError/Code/unauthorized``.
    public init(url: URL, token: String?, httpClient: HTTPClient = sharedHTTPClient) {
        self.init(
            configuration: Configuration(url: url, token: token.map { token in { @Sendable in token } }, tokenRefreshes: false), httpClient: httpClient
        )
    }

    /// A client of the daemon at `url` whose token comes from `token` before
    /// each connection, such as a signed-in session's current access token.
    /// A refused token is reported as ``Message/unreachable(_:)`` and asked for again.
    public init(url: URL, httpClient: HTTPClient = sharedHTTPClient, token: @escaping TokenProvider) {
        self.init(configuration: Configuration(url: url, token: token, tokenRefreshes: true), httpClient: httpClient)
    }

    /// Live events that match `filter`, reconnecting as needed. Ends only on
    /// cancellation or when the daemon rejects the filter (``HeraldClientError/Code/rejected``)
    /// or refuses it under its access rules (``HeraldClientError/Code/forbidden``).
    public func events(_ filter: EventFilter = .all) -> some AsyncSequence<Event, any Error> {
        messages(filter).compactMap { message in
            if case .event(let event) = message { return event }
            return nil
        }
    }

    /// Committed transactions whose rows `filter` passes, one
    /// ``TransactionGroup`` each, reconnecting as needed (`GET
    /// /events?group=transaction`). A 1,000-row transaction is one group.
    /// The daemon must run in durable mode; else the stream ends with
    /// ``HeraldClientError/Code/rejected``.
    public func transactions(_ filter: EventFilter = .all) -> some AsyncSequence<TransactionGroup, any Error> {
        transactionMessages(filter).compactMap { message in
            if case .transaction(let group) = message { return group }
            return nil
        }
    }

    /// Transactions and reconnect markers that match `filter`.
    public func transactionMessages(_ filter: EventFilter = .all) -> EventStream {
        EventStream(client: self, filter: filter, groupsTransactions: true)
    }

    /// What a stream carries: events, and the points where some may have been missed.
    public enum Message: Sendable {
        case event(Event)
        /// One committed transaction, from ``transactionMessages(_:)``.
        case transaction(TransactionGroup)
        /// The stream was established after failed attempts
        /// (``unreachable(_:)``), or re-established after a drop or an overflow. It
        /// resumed after the last event received (`Last-Event-ID`), so the
        /// events in between follow; a ``reset(reason:)`` comes instead when
        /// the daemon could not find that position.
        case reconnected
        /// The daemon could not resume the stream where it stopped (the
        /// position is older than its retention, or it runs notify-only):
        /// events were missed, so refetch what you show.
        case reset(reason: String)
        /// An attempt to connect failed; the stream keeps trying with backoff.
        /// The error says why and what to check.
        case unreachable(HeraldClientError)
    }

    /// Events and reconnect markers that match `filter`.
    public func messages(_ filter: EventFilter = .all) -> EventStream {
        EventStream(client: self, filter: filter, groupsTransactions: false)
    }

    /// `GET /stats`. Over the network, only the operator's key may read it.
    public func statistics() async throws -> DaemonStatistics {
        let (status, body) = try await fetch("/stats")
        guard status == 200 else {
            let code: HeraldClientError.Code = status == 401 ? .unauthorized : status == 403 ? .forbidden : .protocolError
            throw HeraldClientError(code: code, message: "GET /stats answered \(status): \(String(decoding: body.prefix(300), as: UTF8.self))")
        }
        return try JSONDecoder().decode(DaemonStatistics.self, from: body)
    }

    /// A request for `path` (with its query) at the endpoint, with the token.
    func request(path: String) async throws -> HTTPClientRequest {
        let target: String
        switch configuration.endpoint {
        case .unixSocket(let socketPath):
            guard let url = URL(httpURLWithSocketPath: socketPath, uri: path) else {
                throw HeraldClientError(code: .unavailable, message: "invalid socket path \(socketPath)")
            }
            target = url.absoluteString
        case .url(let base):
            var text = base.absoluteString
            while text.hasSuffix("/") { text.removeLast() }
            target = text + path
        }
        var request = HTTPClientRequest(url: target)
        if let token = configuration.token {
            let value: String
            do {
                value = try await token()
            } catch {
                // Perhaps the sign-in service is out of reach: asked again at the next attempt.
                throw HeraldClientError(code: .unavailable, message: "the token provider failed: \(error)")
            }
            if refusedToken.isRefused(value) {
                throw HeraldClientError(
                    code: .unauthorized, message: "pgherald at \(configuration.endpoint) refused the token (401), and the token provider has no other: sign in again"
                )
            }
            request.headers.add(name: "Authorization", value: "Bearer \(value)")
        }
        return request
    }

    /// Fetches a small document; returns the status code and body.
    private func fetch(_ path: String) async throws -> (UInt, Data) {
        if let problem = checkReachable() { throw problem }
        do {
            let response = try await httpClient.execute(try await request(path: path), timeout: .seconds(10), logger: logger)
            let body = try await response.body.collect(upTo: 16 << 20)
            return (response.status.code, Data(buffer: body))
        } catch let error as HeraldClientError {
            throw error
        } catch {
            throw unreachable(error)
        }
    }

    /// Why the socket cannot be reached, or nil when it accepts connections
    /// or the daemon is reached over the network, where only a request tells.
    func checkReachable() -> HeraldClientError? {
        guard case .unixSocket(let path) = configuration.endpoint else { return nil }
        return UnixSocketProbe.connectError(path) == 0 ? nil : unreachable(nil)
    }

    /// Why the daemon cannot be reached, in words that say what to check.
    func unreachable(_ error: (any Error)?) -> HeraldClientError {
        guard case .unixSocket(let path) = configuration.endpoint else {
            return HeraldClientError(code: .unavailable, message: "cannot reach pgherald at \(configuration.endpoint): \(error.map { "\($0)" } ?? "no answer")")
        }
        var status = stat()
        let reason: String
        if path.utf8.count > UnixSocketProbe.maximumPathLength {
            reason = "the path is longer than the \(UnixSocketProbe.maximumPathLength) bytes a Unix socket allows"
        } else if stat(path, &status) != 0 {
            reason = errno == ENOENT
                ? "no such file; is the daemon running? (systemctl status pgherald)"
                : String(cString: strerror(errno))
        } else if status.st_mode & S_IFMT != S_IFSOCK {
            reason = "not a socket; is --socket the daemon's socket?"
        } else if access(path, W_OK) != 0 {
            reason = "permission denied; the socket's group may connect (ls -l \(path))"
        } else if let error {
            reason = "\(error)"
        } else {
            reason = "nothing accepts connections on it; is the daemon running? (systemctl status pgherald)"
        }
        return HeraldClientError(code: .unavailable, message: "cannot reach pgherald at \(path): \(reason)")
    }
}
