public import Herald

/// The protocol state of one Supabase Realtime socket: which channels are
/// joined, and what to do about each message. Pure; the connection carries
/// out its actions.
public struct RealtimeSession: Sendable {
    /// What the connection must do for a message, in order.
    public enum Action: Sendable, Equatable {
        case send(PhoenixMessage)
        /// Check the token and bindings, send the join's reply, subscribe, and
        /// then confirm with a `system` message (or report the problem).
        case join(RealtimeJoin)
        /// Stop delivering to the channel.
        case leave(topic: String)
        /// Check a refreshed token and apply its grant to the channel.
        case refreshToken(topic: String, token: String)
        /// Check the sender's limits, hand the message to the topic's other
        /// members (and the sender's own channel, with `self`), and acknowledge it if asked.
        case broadcast(RealtimeBroadcast)
        /// Track the channel's presence with `meta`, or untrack it (nil), tell
        /// the topic's members the difference, and reply `ok`.
        case presence(topic: String, meta: JSONValue?, reply: PhoenixMessage)
    }

    /// Limits that keep one socket's cost bounded.
    public static let maximumChannels = 100
    public static let maximumBindings = 100
    /// A topic's name, after `realtime:`: kept per channel, in presence and in the resume book.
    public static let maximumTopicBytes = 1024
    /// A presence key (`config.presence.key`): sent in every presence state of its topic.
    public static let maximumPresenceKeyBytes = 256
    /// Filter conditions over all of a socket's bindings, each counted at
    /// its ``ColumnPredicate/cost`` (1, or for a `like` pattern 1 for each
    /// 64 characters): each is evaluated on every change of its table,
    /// so this bounds one socket's work an event.
    public static let maximumConditions = 512
    static let topicPrefix = "realtime:"

    /// Joined channels by topic, with their join refs.
    public private(set) var joined: [String: JSONValue] = [:]
    /// What each joined channel asked of broadcasts.
    private var broadcastOptions: [String: RealtimeJoin.BroadcastOptions] = [:]
    /// The filter conditions of each joined channel's bindings.
    private var conditions: [String: Int] = [:]
    private var nextBindingID = 1

    public init() {}

    public mutating func receive(_ message: PhoenixMessage) -> [Action] {
        switch (message.topic, message.event) {
        case ("phoenix", "heartbeat"):
            return [.send(.reply(to: message, status: "ok", response: .object([:])))]
        case (_, "phx_join"):
            return join(message)
        case (_, "phx_leave"):
            let wasJoined = joined.removeValue(forKey: message.topic) != nil
            broadcastOptions.removeValue(forKey: message.topic)
            conditions.removeValue(forKey: message.topic)
            let close = PhoenixMessage.push(topic: message.topic, joinRef: message.joinRef, event: "phx_close", payload: .object([:]))
            return (wasJoined ? [.leave(topic: message.topic)] : [])
                + [.send(.reply(to: message, status: "ok", response: .object([:]))), .send(close)]
        case (_, "access_token"):
            // Clients expect no reply to a token push.
            guard joined[message.topic] != nil, let token = message.payload["access_token"]?.stringValue else { return [] }
            return [.refreshToken(topic: message.topic, token: token)]
        case (_, "broadcast"):
            guard joined[message.topic] != nil else {
                return [.send(.errorReply(to: message, reason: "unmatched topic"))]
            }
            return [broadcast(message)]
        case (_, "presence"):
            guard joined[message.topic] != nil else {
                return [.send(.errorReply(to: message, reason: "unmatched topic"))]
            }
            return [presence(message)]
        default:
            guard joined[message.topic] != nil else {
                return [.send(.errorReply(to: message, reason: "unmatched topic"))]
            }
            return [.send(.errorReply(to: message, reason: "pgherald serves postgres_changes and broadcast; '\(message.event.prefix(40))' is not supported"))]
        }
    }

    /// `{type: presence, event: track, payload: META}` or `{event: untrack}`; realtime-py leaves out `type`.
    private func presence(_ message: PhoenixMessage) -> Action {
        let reply = PhoenixMessage.reply(to: message, status: "ok", response: .object([:]))
        switch message.payload["event"]?.stringValue {
        case "track":
            let meta = message.payload["payload"] ?? .object([:])
            guard case .object = meta else { return .send(.errorReply(to: message, reason: "a presence's payload is an object")) }
            return .presence(topic: message.topic, meta: meta, reply: reply)
        case "untrack":
            return .presence(topic: message.topic, meta: nil, reply: reply)
        default:
            return .send(.errorReply(to: message, reason: "a presence message is {type: presence, event: track or untrack, payload}"))
        }
    }

    private func broadcast(_ message: PhoenixMessage) -> Action {
        guard message.payload["event"]?.stringValue != nil else {
            return .send(.errorReply(to: message, reason: "a broadcast's payload is {type: broadcast, event, payload}"))
        }
        let acknowledged = broadcastOptions[message.topic]?.acknowledge ?? false
        return .broadcast(RealtimeBroadcast(
            topic: message.topic,
            message: .push(topic: message.topic, event: "broadcast", payload: message.payload),
            acknowledgement: acknowledged ? .reply(to: message, status: "ok", response: .object([:])) : nil,
            request: message
        ))
    }

    /// Forgets a channel the server ended (an overflow, a revoked grant).
    public mutating func channelEnded(topic: String) {
        joined.removeValue(forKey: topic)
        broadcastOptions.removeValue(forKey: topic)
        conditions.removeValue(forKey: topic)
    }

    private mutating func join(_ message: PhoenixMessage) -> [Action] {
        guard message.topic.hasPrefix(Self.topicPrefix), message.topic.count > Self.topicPrefix.count else {
            return [.send(.errorReply(to: message, reason: "topics are realtime:NAME"))]
        }
        guard message.topic.utf8.count <= Self.topicPrefix.utf8.count + Self.maximumTopicBytes else {
            return [.send(.errorReply(to: message, reason: "a topic's name is at most \(Self.maximumTopicBytes) bytes"))]
        }
        let config = message.payload["config"]
        let presenceKey = config?["presence"]?["key"]?.stringValue ?? ""
        guard presenceKey.utf8.count <= Self.maximumPresenceKeyBytes else {
            return [.send(.errorReply(to: message, reason: "config.presence.key is at most \(Self.maximumPresenceKeyBytes) bytes"))]
        }
        var actions: [Action] = []
        if joined.removeValue(forKey: message.topic) != nil {
            // Phoenix's rule: a second join of a topic replaces the first.
            actions.append(.leave(topic: message.topic))
            broadcastOptions.removeValue(forKey: message.topic)
            conditions.removeValue(forKey: message.topic)
        }
        guard joined.count < Self.maximumChannels else {
            return actions + [.send(.errorReply(to: message, reason: "a socket joins at most \(Self.maximumChannels) channels"))]
        }
        let requested: [JSONValue]
        switch message.payload["config"]?["postgres_changes"] {
        case nil, .null?: requested = []
        case .array(let items)?: requested = items
        default: return actions + [.send(.errorReply(to: message, reason: "config.postgres_changes must be a list"))]
        }
        guard requested.count <= Self.maximumBindings else {
            return actions + [.send(.errorReply(to: message, reason: "a channel has at most \(Self.maximumBindings) postgres_changes bindings"))]
        }
        var bindings: [RealtimeBinding] = []
        do {
            for value in requested {
                bindings.append(try RealtimeBinding(value, id: nextBindingID + bindings.count))
            }
        } catch {
            return actions + [.send(.errorReply(to: message, reason: error.message))]
        }
        // A filter that does not parse is refused later, in Supabase's words; it costs nothing meanwhile.
        let joining = bindings.reduce(0) { $0 + ((try? $1.eventFilter().predicates.reduce(0) { $0 + $1.cost }) ?? 0) }
        let held = conditions.values.reduce(0, +)
        guard held + joining <= Self.maximumConditions else {
            return actions + [.send(.errorReply(
                to: message, reason: "a socket's bindings hold at most \(Self.maximumConditions) filter conditions in all (a like pattern counts 1 for each 64 characters); it holds \(held), and this join adds \(joining)"
            ))]
        }
        conditions[message.topic] = joining
        let options = RealtimeJoin.BroadcastOptions(
            echo: config?["broadcast"]?["self"] == .bool(true), acknowledge: config?["broadcast"]?["ack"] == .bool(true)
        )
        nextBindingID += bindings.count
        joined[message.topic] = message.joinRef
        broadcastOptions[message.topic] = options
        let reply = PhoenixMessage.reply(
            to: message, status: "ok",
            response: .object(["postgres_changes": .array(bindings.map { .object($0.echo) })])
        )
        let token = message.payload["access_token"]?.stringValue
        return actions + [.join(RealtimeJoin(
            request: message, bindings: bindings, accessToken: token, reply: reply, broadcast: options,
            presence: .init(key: presenceKey, enabled: config?["presence"]?["enabled"] == .bool(true)),
            isPrivate: config?["private"] == .bool(true), conditions: joining
        ))]
    }
}

/// A `phx_join` the session accepted, for the connection to carry out.
public struct RealtimeJoin: Sendable, Equatable {
    public var request: PhoenixMessage
    public var bindings: [RealtimeBinding]
    /// The join's own token, which takes the socket's key's place for this channel.
    public var accessToken: String?
    /// The `ok` reply, every binding echoed with its id.
    public var reply: PhoenixMessage
    /// `config.broadcast`: whether the sender gets its own broadcasts back, and an `ok` for each.
    public var broadcast: BroadcastOptions
    /// `config.presence`: the key the channel's presence is tracked under
    /// (empty: one the server makes), and whether it wants the topic's presence state on joining.
    public var presence: PresenceOptions
    /// `config.private`: a topic only callers granted it may join.
    public var isPrivate: Bool
    /// What the bindings' filter conditions cost (``ColumnPredicate/cost``), counted against the caller's share.
    public var conditions: Int = 0

    public struct PresenceOptions: Sendable, Equatable {
        public var key: String
        public var enabled: Bool

        public init(key: String = "", enabled: Bool = false) {
            self.key = key
            self.enabled = enabled
        }
    }

    public struct BroadcastOptions: Sendable, Equatable {
        /// `self`: the sender's channel receives its own broadcasts too.
        public var echo: Bool
        /// `ack`: the server confirms each broadcast with an `ok` reply.
        public var acknowledge: Bool

        public init(echo: Bool = false, acknowledge: Bool = false) {
            self.echo = echo
            self.acknowledge = acknowledge
        }
    }

    public var topic: String { request.topic }

    /// The channel's name, as the `system` messages give it.
    public var channelName: String { String(request.topic.dropFirst(RealtimeSession.topicPrefix.count)) }

    /// The `system` message that tells the client its subscription is live, or why it is not.
    public func systemMessage(ok: Bool, _ text: String) -> PhoenixMessage {
        .push(topic: topic, joinRef: request.joinRef, event: "system", payload: .object([
            "channel": .string(channelName), "extension": .string("postgres_changes"),
            "message": .string(text), "status": .string(ok ? "ok" : "error"),
        ]))
    }

    /// Ends the channel from the server's side; clients rejoin with backoff.
    public func channelError(_ reason: String) -> PhoenixMessage {
        .push(topic: topic, joinRef: request.joinRef, event: "phx_error", payload: .object(["reason": .string(reason)]))
    }

    /// Closes the channel for good: clients do not rejoin after `phx_close`.
    public var channelClose: PhoenixMessage {
        .push(topic: topic, joinRef: request.joinRef, event: "phx_close", payload: .object([:]))
    }
}

/// A `broadcast` a client sent on a topic it has joined.
public struct RealtimeBroadcast: Sendable, Equatable {
    public var topic: String
    /// What the topic's members receive: the payload as sent, with no ref.
    public var message: PhoenixMessage
    /// The `ok` reply the sender's `ack` asked for; nil without it.
    public var acknowledgement: PhoenixMessage?
    /// The message as the client sent it, for an error reply.
    public var request: PhoenixMessage
}
