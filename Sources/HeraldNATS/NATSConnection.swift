public import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// One connection to a NATS server, for publishing with replies (JetStream
/// acknowledgements and API calls) and for subscriptions. Requests are
/// written in the order they are made and may be answered in any order.
///
/// Use it inside ``withConnection(host:port:options:connectTimeout:_:)``,
/// which connects, authenticates, and closes the connection when the body
/// returns or throws.
public final class NATSConnection: Sendable {
    private let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    private let inbox: String
    private let state = Mutex(State())

    private enum Reply {
        case waiting(CheckedContinuation<NATSMessage, any Error>?)
        case arrived(NATSMessage)
    }

    private struct State {
        var replies: [String: Reply] = [:]
        var nextReply = 0
        /// By subscription id; "1" is the reply inbox's.
        var subscriptions: [String: AsyncStream<[NATSMessage]>.Continuation] = [:]
        var nextSubscription = 1
        var closed: NATSError?
        var info: NATSServerInfo?
    }

    private init(outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>, inbox: String) {
        self.outbound = outbound
        self.inbox = inbox
    }

    /// Why the connection ended, once it has.
    public var closedReason: NATSError? { state.withLock { $0.closed } }

    /// The server's `INFO`, as it answered this connection.
    public var info: NATSServerInfo? { state.withLock { $0.info } }

    /// Connects to `host:port`, sends `options`, waits for the server to
    /// accept them (a `PING` answered), runs `body`, and closes.
    /// - Parameter tls: upgrade to TLS after the server's `INFO`, as NATS
    ///   does; nil refuses a server that requires TLS, and a server that does
    ///   not offer it is refused when `tls` is set.
    public static func withConnection<Result: Sendable>(
        host: String, port: Int, options: NATSConnectOptions, tls: NATSTLS? = nil, connectTimeout: Duration = .seconds(5),
        _ body: @escaping @Sendable (NATSConnection) async throws -> Result
    ) async throws -> Result {
        let channel: NIOAsyncChannel<ByteBuffer, ByteBuffer>
        do {
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(.nanoseconds(Int64(connectTimeout / .nanoseconds(1))))
                .connect(host: host, port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
        } catch {
            throw NATSError(.notListening, "nats://\(host):\(port): \(Self.plainWords(connecting: error, timeout: connectTimeout))")
        }
        return try await channel.executeThenClose { inbound, outbound in
            let connection = NATSConnection(outbound: outbound, inbox: "_INBOX.\(UInt64.random(in: 0...UInt64.max))")
            let (ready, accepted) = AsyncThrowingStream<Void, any Error>.makeStream()
            return try await withThrowingTaskGroup(of: Result?.self) { group in
                let pipeline = channel.channel.pipeline
                let upgrade: @Sendable () async throws -> Void = {
                    var configuration = TLSConfiguration.makeClientConfiguration()
                    if let file = tls?.trustRootsFile { configuration.trustRoots = .file(file) }
                    let context = try NIOSSLContext(configuration: configuration)
                    // An IP address cannot be a TLS server name; the chain is still verified.
                    let isAddress = host.allSatisfy { $0.isNumber || $0 == "." || $0 == ":" }
                    try await pipeline.addHandler(try NIOSSLClientHandler(context: context, serverHostname: isAddress ? nil : host), position: .first).get()
                }
                group.addTask {
                    await connection.read(
                        inbound, options: options, server: "nats://\(host):\(port)", upgrade: tls == nil ? nil : upgrade, accepted: accepted
                    )
                    return nil
                }
                defer { group.cancelAll() }
                try await withThrowingTaskGroup(of: Void.self) { handshake in
                    handshake.addTask {
                        for try await _ in ready { return }
                        throw NATSError(.unreachable, "nats://\(host):\(port) closed the connection during the handshake")
                    }
                    handshake.addTask {
                        try await Task.sleep(for: connectTimeout)
                        throw NATSError(.unreachable, "nats://\(host):\(port) did not complete the handshake within \(connectTimeout)")
                    }
                    defer { handshake.cancelAll() }
                    try await handshake.next()
                }
                // The body runs while the connection lasts: one that ends first (the server
                // went away while the body waited for work) ends the body with the reason.
                group.addTask { try await body(connection) }
                while let finished = try await group.next() {
                    if let finished { return finished }
                    throw connection.state.withLock { $0.closed } ?? NATSError(.unreachable, "nats://\(host):\(port) closed the connection")
                }
                throw NATSError(.unreachable, "nats://\(host):\(port) closed the connection")
            }
        }
    }

    /// Does the handshake (`INFO`, then `CONNECT` and a `PING` whose `PONG`
    /// means the server took the options), then hands replies to their
    /// requests and answers pings; fails every waiting request when the
    /// connection ends. The only reader of `inbound`.
    private func read(
        _ inbound: NIOAsyncChannelInboundStream<ByteBuffer>, options: NATSConnectOptions, server: String,
        upgrade: (@Sendable () async throws -> Void)?, accepted: AsyncThrowingStream<Void, any Error>.Continuation
    ) async {
        var parser = NATSFrameParser()
        var ending = NATSError(.unreachable, "\(server) closed the connection")
        var handshaking = true
        var arrived = ArrivedMessages()
        do {
            reading: for try await buffer in inbound {
                // What a read brought is handed on when it is parsed, and before anything that may wait.
                defer { arrived.hand(to: self) }
                parser.append(buffer.readableBytesView)
                while let operation = try parser.next() {
                    switch operation {
                    case .info(let info) where handshaking:
                        switch (info.tlsRequired, upgrade) {
                        case (true, nil):
                            ending = NATSError(.refused, "\(server) requires TLS: set nats.tls: true (and nats.ca_file for a private CA)")
                            break reading
                        case (false, .some):
                            ending = NATSError(.refused, "\(server) does not offer TLS, and nats.tls is set")
                            break reading
                        case (true, .some(let upgrade)):
                            try await upgrade()
                        case (false, nil):
                            break
                        }
                        state.withLock { $0.info = info }
                        var bytes: [UInt8] = []
                        NATSClientOperation.connect(try options.answering(nonce: info.nonce)).encode(into: &bytes)
                        NATSClientOperation.ping.encode(into: &bytes)
                        NATSClientOperation.subscribe(subject: inbox + ".*", subscriptionID: Self.inboxSubscription).encode(into: &bytes)
                        try await outbound.write(ByteBuffer(bytes: bytes))
                    case .pong where handshaking:
                        handshaking = false
                        accepted.yield()
                    case .message(let message) where message.subscriptionID == Self.inboxSubscription:
                        answer(message)
                    case .message(let message):
                        arrived.add(message)
                    case .ping:
                        arrived.hand(to: self)
                        try await write(.pong)
                    case .error(let text):
                        let lowered = text.lowercased()
                        let refused = lowered.contains("authorization") || lowered.contains("authentication")
                        ending = NATSError(refused ? .refused : .serverError, "\(server) said: \(text)")
                        break reading
                    case .info, .pong, .ok:
                        continue
                    }
                }
            }
        } catch let error as NATSProtocolError {
            ending = NATSError(.protocolViolation, "\(server): \(error)")
        } catch let error as NATSError {
            ending = NATSError(error.code, "\(server): \(error.message)")
        } catch {
            ending = NATSError(.unreachable, "the connection to \(server) broke: \(error)")
        }
        accepted.finish(throwing: ending)
        close(ending)
    }

    /// The messages of one read of the socket, by subscription, in the order they came: each
    /// subscription gets them as one element of its stream, so that a read of many messages
    /// wakes its reader once, not once a message.
    private struct ArrivedMessages {
        /// Reads rarely carry more than a subscription or two: a list beats a dictionary here.
        private var bySubscription: [(id: String, messages: [NATSMessage])] = []

        mutating func add(_ message: NATSMessage) {
            if let index = bySubscription.firstIndex(where: { $0.id == message.subscriptionID }) {
                bySubscription[index].messages.append(message)
            } else {
                bySubscription.append((message.subscriptionID, [message]))
            }
        }

        mutating func hand(to connection: NATSConnection) {
            guard !bySubscription.isEmpty else { return }
            let streams = connection.state.withLock { state in bySubscription.map { state.subscriptions[$0.id] } }
            for (stream, arrived) in zip(streams, bySubscription) { _ = stream?.yield(arrived.messages) }
            bySubscription.removeAll(keepingCapacity: true)
        }
    }

    /// A reply to one of this connection's requests.
    private func answer(_ message: NATSMessage) {
        let waiting = state.withLock { state -> CheckedContinuation<NATSMessage, any Error>? in
            guard case .waiting(let continuation) = state.replies[message.subject] else { return nil }
            if let continuation {
                state.replies[message.subject] = nil
                return continuation
            }
            state.replies[message.subject] = .arrived(message)
            return nil
        }
        waiting?.resume(returning: message)
    }

    private func close(_ error: NATSError) {
        let (waiting, subscriptions) = state.withLock { state in
            state.closed = error
            defer {
                state.replies = [:]
                state.subscriptions = [:]
            }
            return (
                state.replies.values.compactMap { if case .waiting(let continuation) = $0 { continuation } else { nil } },
                Array(state.subscriptions.values)
            )
        }
        for continuation in waiting { continuation.resume(throwing: error) }
        for subscription in subscriptions { subscription.finish() }
    }

    private static let inboxSubscription = "1"

    /// Messages on `subject` (wildcards allowed) until the connection ends,
    /// which finishes the stream: each element is what one read of the socket
    /// brought, in order. A reader that falls `backlog` reads behind misses
    /// the newest ones: NATS core delivers at most once.
    public func subscribe(to subject: String, backlog: Int = 10_000) async throws -> AsyncStream<[NATSMessage]> {
        let (messages, continuation) = AsyncStream<[NATSMessage]>.makeStream(bufferingPolicy: .bufferingOldest(backlog))
        let subscriptionID = try state.withLock { state throws(NATSError) -> String in
            if let closed = state.closed { throw closed }
            state.nextSubscription += 1
            state.subscriptions[String(state.nextSubscription)] = continuation
            return String(state.nextSubscription)
        }
        do {
            try await write(.subscribe(subject: subject, subscriptionID: subscriptionID))
        } catch {
            _ = state.withLock { $0.subscriptions.removeValue(forKey: subscriptionID) }
            throw NATSError(.unreachable, "cannot write to the NATS server: \(error)")
        }
        return messages
    }

    /// Publishes without waiting for anything: NATS core, at most once.
    public func publish(subject: String, payload: [UInt8]) async throws {
        if let closed = state.withLock({ $0.closed }) { throw closed }
        do {
            try await write(.publish(subject: subject, replyTo: nil, headers: [], payload: payload))
        } catch {
            throw NATSError(.unreachable, "cannot write to the NATS server: \(error)")
        }
    }

    private func write(_ operation: NATSClientOperation) async throws {
        var bytes: [UInt8] = []
        operation.encode(into: &bytes)
        try await outbound.write(ByteBuffer(bytes: bytes))
    }

    /// Publishes with a reply subject of its own, and returns that subject
    /// for ``reply(to:timeout:)``. Requests go out in the order of these calls.
    public func send(subject: String, headers: [(name: String, value: String)] = [], payload: [UInt8]) async throws -> String {
        let reply = try state.withLock { state throws(NATSError) -> String in
            if let closed = state.closed { throw closed }
            state.nextReply += 1
            let reply = "\(inbox).\(state.nextReply)"
            state.replies[reply] = .waiting(nil)
            return reply
        }
        do {
            try await write(.publish(subject: subject, replyTo: reply, headers: headers, payload: payload))
        } catch {
            _ = state.withLock { $0.replies.removeValue(forKey: reply) }
            throw NATSError(.unreachable, "cannot write to the NATS server: \(error)")
        }
        return reply
    }

    /// The answer to the request that ``send(subject:headers:payload:)`` made.
    public func reply(to reply: String, timeout: Duration) async throws -> NATSMessage {
        try await withThrowingTaskGroup(of: NATSMessage.self) { group in
            group.addTask { try await self.awaitReply(reply) }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw NATSError(.timedOut, "no answer from the NATS server within \(timeout)")
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    /// Sends a request and waits for its answer.
    public func request(subject: String, payload: [UInt8] = [], timeout: Duration) async throws -> NATSMessage {
        try await reply(to: send(subject: subject, payload: payload), timeout: timeout)
    }

    private func awaitReply(_ reply: String) async throws -> NATSMessage {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let ready: Swift.Result<NATSMessage, any Error>? = state.withLock { state in
                    switch state.replies[reply] {
                    case .arrived(let message):
                        state.replies[reply] = nil
                        return .success(message)
                    case .waiting:
                        state.replies[reply] = .waiting(continuation)
                        return nil
                    case nil:
                        return .failure(state.closed ?? CancellationError())
                    }
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            let waiting = state.withLock { state -> CheckedContinuation<NATSMessage, any Error>? in
                defer { state.replies[reply] = nil }
                if case .waiting(let continuation) = state.replies[reply] { return continuation }
                return nil
            }
            waiting?.resume(throwing: CancellationError())
        }
    }
}
