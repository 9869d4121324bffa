import Foundation
import Herald
import HeraldCluster
import HeraldPostgres
import HeraldRealtime
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOWebSocket

/// One Supabase Realtime socket: reads messages, runs them through a
/// ``RealtimeSession``, and runs each joined channel as a task of its own
/// that writes its events as they come.
struct RealtimeConnection {
    let endpoint: RealtimeEndpoint
    let framing: PhoenixFraming
    let caller: RealtimeCaller
    let outbound: WebSocketOutboundWriter
    /// The connection's NIO channel: channels run on its event loop and write to it directly.
    let socket: any Channel
    /// Bytes this socket's channels may have waiting, with its unfinished message: `realtime.max_queued_bytes`.
    let budget: SocketBudget

    func run(_ inbound: WebSocketInboundStream) async {
        var session = RealtimeSession()
        var channels: [String: RealtimeChannel] = [:]
        var limiter = BroadcastLimiter(
            maximumBytes: endpoint.configuration.broadcastMaximumBytes, maximumPerSecond: endpoint.configuration.broadcastMaximumPerSecond
        )
        endpoint.logger.debug("realtime socket opened", metadata: ["caller": "\(caller.name)", "vsn": "\(framing.rawValue)"])
        let registration = ObjectIdentifier(socket)
        endpoint.openSockets.withLock { [outbound] in
            $0[registration] = RealtimeEndpoint.OpenSocket(caller: caller) { reason in
                try? await outbound.close(.policyViolation, reason: reason)
            }
        }
        defer { _ = endpoint.openSockets.withLock { $0.removeValue(forKey: registration) } }
        do {
            for try await message in inbound.messages(maxSize: endpoint.configuration.maximumMessageSize) {
                let request: PhoenixMessage
                let bytes: [UInt8], binary: Bool
                switch message {
                case .text(let text): (bytes, binary) = (Array(text.utf8), false)
                case .binary(let buffer): (bytes, binary) = (Array(buffer.readableBytesView), true)
                }
                // A large message's work (decoding, measuring, framing for every member) is done at a low
                // priority: a client that sends them at its limits cannot take a core from the deliveries.
                let large = bytes.count > Self.largeMessage
                do {
                    request = try await onLane(large) { [framing] in
                        Result { () throws(PhoenixFrameError) in try binary ? framing.decodeBinary(bytes) : framing.decode(bytes) }
                    }.get()
                } catch {
                    // Without a readable ref there is nothing to reply to; say so on the socket's own topic.
                    try await send(.init(topic: "phoenix", event: "phx_reply", payload: .object([
                        "status": .string("error"), "response": .object(["reason": .string("malformed message: \(error.message)")]),
                    ])))
                    continue
                }
                // A channel the server ended is closed to its client's sends, as one it left.
                if let ended = channels[request.topic], ended.hasEnded, request.event != "phx_join" {
                    channels.removeValue(forKey: request.topic)
                    session.channelEnded(topic: request.topic)
                }
                for action in session.receive(request) {
                    switch action {
                    case .send(let reply):
                        try await send(reply)
                    case .join(let join):
                        channels[join.topic] = try await open(join, session: &session)
                    case .leave(let topic):
                        await channels.removeValue(forKey: topic)?.stop(remember: false)
                    case .refreshToken(let topic, let token):
                        guard let channel = channels[topic] else { continue }
                        if let problem = await refresh(channel, token: token) {
                            await channels.removeValue(forKey: topic)?.stop(remember: false)
                            session.channelEnded(topic: topic)
                            try await send(channel.join.systemMessage(ok: false, problem))
                            try await send(channel.join.channelClose)
                        }
                    case .broadcast(let broadcast):
                        guard let channel = channels[broadcast.topic] else { continue }
                        if let authorization = channel.authorization, !authorization.writesBroadcast {
                            try await send(.errorReply(to: broadcast.request, reason: "Unauthorized: You do not have permissions to write to this Channel topic: \(channel.join.channelName)"))
                            continue
                        }
                        // The whole message counts: its event and every field beside the payload reach every member too.
                        let payload = broadcast.message.payload
                        let size = await onLane(large) { payload.jsonText.utf8.count }
                        if let refusal = limiter.admit(bytes: size, now: .now) {
                            try await send(.errorReply(to: broadcast.request, reason: refusal))
                            continue
                        }
                        if let refusal = endpoint.broadcasts.clusterRefusal(broadcast: broadcast.message, on: channel.broadcastTopic) {
                            try await send(.errorReply(to: broadcast.request, reason: refusal))
                            continue
                        }
                        let (hub, topic, sender) = (endpoint.broadcasts, channel.broadcastTopic, ObjectIdentifier(channel))
                        await onLane(large) { hub.publish(broadcast.message, to: topic, from: sender) }
                        if let acknowledgement = broadcast.acknowledgement { try await send(acknowledgement) }
                    case .presence(let topic, let meta, let reply):
                        guard let channel = channels[topic] else { continue }
                        if let authorization = channel.authorization, !authorization.writesPresence {
                            try await send(.errorReply(to: reply, reason: "Unauthorized: You do not have permissions to track presence on this Channel topic: \(channel.join.channelName)"))
                            continue
                        }
                        let size = await onLane(large) { meta?.jsonText.utf8.count ?? 0 }
                        if let refusal = limiter.admit(bytes: size, now: .now) {
                            try await send(.errorReply(to: reply, reason: refusal))
                            continue
                        }
                        if let meta, let refusal = endpoint.broadcasts.clusterRefusal(tracking: channel.presenceKey, meta: meta, on: channel.broadcastTopic) {
                            try await send(.errorReply(to: reply, reason: refusal))
                            continue
                        }
                        let (hub, topic, tracker, key) = (endpoint.broadcasts, channel.broadcastTopic, ObjectIdentifier(channel), channel.presenceKey)
                        await onLane(large) { hub.track(topic, channel: tracker, key: key, meta: meta) }
                        try await send(reply)
                    }
                }
            }
        } catch {
            endpoint.logger.debug("realtime socket ended", metadata: ["caller": "\(caller.name)", "error": "\(error)"])
        }
        for channel in channels.values { await channel.stop(remember: true) }
        endpoint.logger.debug("realtime socket closed", metadata: ["caller": "\(caller.name)", "channels": "\(channels.count)"])
    }

    /// Past this many bytes, a message's work runs on ``ColumnCheckLane``.
    static let largeMessage = 16 << 10

    /// `work`'s result, run on the low-priority lane when `large`, else here.
    private func onLane<Value: Sendable>(_ large: Bool, _ work: @escaping @Sendable () -> Value) async -> Value {
        large ? await ColumnCheckLane.shared.run(work) : work()
    }

    /// Starts a joined channel, or refuses the join when its own token is not accepted.
    private func open(_ join: RealtimeJoin, session: inout RealtimeSession) async throws -> RealtimeChannel? {
        var channelCaller = caller
        let credentials = endpoint.credentials.withLock { $0 }
        // The channel's own token, or else the socket's key or token as the credentials are now:
        // a reload may have revoked it or changed its grant, and a token may have expired.
        let presented = join.accessToken.flatMap { $0 == caller.presentedKey ? nil : $0 } ?? (caller.peer == nil ? caller.presentedKey : nil)
        if let presented, !credentials.isEmpty {
            do {
                channelCaller = RealtimeCaller(try credentials.identify(presented, now: Date().timeIntervalSince1970), presentedKey: presented)
            } catch {
                session.channelEnded(topic: join.topic)
                try await send(.errorReply(to: join.request, reason: error.message))
                return nil
            }
        }
        var authorization: ChannelAuthorization?
        if join.isPrivate {
            let refusal: String?
            switch await authorize(join.channelName, for: channelCaller) {
            case .success(let answer?):
                authorization = answer
                refusal = answer.mayJoin ? nil : "Unauthorized: \(ChannelAuthorization.readRefusal(topic: join.channelName))"
            case .success(nil):
                refusal = channelCaller.scope.covers(topic: join.channelName)
                    ? nil
                    : "Unauthorized: \(channelCaller.name) is not granted the private topic '\(join.channelName)' (topics: in its key, role or access rule)"
            case .failure(let error):
                refusal = "Unauthorized: the channel's authorization could not be checked: \(error.reason)"
            }
            if let refusal {
                endpoint.logger.info("refused a private realtime channel", metadata: [
                    "caller": "\(channelCaller.name)", "topic": "\(join.topic)", "reason": "\(refusal)",
                ])
                session.channelEnded(topic: join.topic)
                try await send(.errorReply(to: join.request, reason: refusal))
                return nil
            }
        }
        let channel = RealtimeChannel(join: join, caller: channelCaller, authorization: authorization)
        // Before the `ok` reply: a join past a limit is refused as a join, and its topic is not joined.
        if let refusal = endpoint.reserveChannel(for: channel) {
            endpoint.logger.warning("refused a realtime channel", metadata: ["caller": "\(channelCaller.name)", "reason": "\(refusal)"])
            session.channelEnded(topic: join.topic)
            try await send(.errorReply(to: join.request, reason: refusal))
            return nil
        }
        // A member before the reply: a client that has its `ok` may count on the next broadcast
        // (its own or another's) reaching it. What arrives meanwhile waits in the stream.
        let identifier = ObjectIdentifier(channel)
        let broadcasts = endpoint.broadcasts.join(channel.broadcastTopic, channel: identifier, framing: framing, echo: join.broadcast.echo, budget: budget)
        // Here rather than on the channel's task: a leave right after the join may cancel that task
        // before it runs, and every join gets its reply before the socket's next message is read.
        do {
            try await send(join.reply)
        } catch {
            endpoint.broadcasts.leave(channel.broadcastTopic, channel: identifier)
            budget.close(identifier)
            endpoint.releaseChannel(of: channel)
            throw error
        }
        channel.start(on: socket.eventLoop) { [endpoint, framing, outbound, socket, budget] in
            await withDiscardingTaskGroup { group in
                group.addTask {
                    for await frame in broadcasts {
                        // Counted until written: a frame in the writer is still held.
                        defer { budget.release(frame.count, for: identifier) }
                        do { try await outbound.write(framing.frame(frame)) } catch { return }
                    }
                }
                group.addTask { await channel.endWhenTokenExpires() }
                await endpoint.serve(channel, framing: framing, outbound: outbound, socket: socket)
                channel.markEnded()
                group.cancelAll()
            }
            endpoint.broadcasts.leave(channel.broadcastTopic, channel: identifier)
            budget.close(identifier)
            endpoint.releaseChannel(of: channel)
        }
        return channel
    }

    /// Under row-level security, where the database has Supabase's
    /// `realtime.messages`: what its policies let `caller` do on `topic`.
    /// Nil where they do not govern it (no identity, no such table): the `topics:` grants do.
    private func authorize(_ topic: String, for caller: RealtimeCaller) async -> Result<ChannelAuthorization?, RowSecurityError> {
        guard let identity = caller.scope.rowSecurity, let gate = endpoint.rowSecurity else { return .success(nil) }
        do {
            return .success(try await gate.authorize(topic: topic, as: identity))
        } catch {
            return .failure(error)
        }
    }

    /// Applies a pushed token to `channel`; the reason to end it, if the token
    /// or its grant no longer admits it. A private channel that policies
    /// govern is checked against them again.
    private func refresh(_ channel: RealtimeChannel, token: String) async -> String? {
        let credentials = endpoint.credentials.withLock { $0 }
        // Unix-socket peers without keys configured are admitted by who they are, not by tokens.
        guard !credentials.isEmpty else { return nil }
        do {
            let identity = try credentials.identify(token, now: Date().timeIntervalSince1970)
            let caller = RealtimeCaller(identity, presentedKey: token)
            var authorization: ChannelAuthorization?
            if channel.join.isPrivate {
                switch await authorize(channel.join.channelName, for: caller) {
                case .success(let answer): authorization = answer
                case .failure(let error): return "Unauthorized: the channel's authorization could not be checked: \(error.reason)"
                }
            }
            // Another identity takes the channel over, and its share: it is counted against the new one.
            if let refusal = endpoint.recountChannel(channel, as: caller.consumer) { return refusal }
            try channel.regrant(caller, authorization: authorization)
            return nil
        } catch let error as RealtimeAuthError {
            return error.code == .expired ? "Token has expired" : "Invalid token: \(error.message)"
        } catch {
            return "Unauthorized: \(error)"
        }
    }

    private func send(_ message: PhoenixMessage) async throws {
        try await outbound.write(framing.frame(framing.encode(message)))
    }
}

extension PhoenixFraming {
    /// One text frame holding `bytes`, written without a trip through `String`.
    func frame(_ bytes: [UInt8]) -> WebSocketOutboundWriter.OutboundFrame {
        .custom(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(bytes: bytes)))
    }
}
