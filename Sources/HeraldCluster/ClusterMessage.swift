import Herald
import HeraldRealtime

/// What cluster members tell each other over NATS core subjects, as JSON.
///
/// Presence is a map of single-writer registers: each member alone changes
/// its own entries and numbers its changes (`version`) within one run of
/// the daemon (`incarnation`). A receiver applies a member's diff only when
/// it is the next version; on a gap, an unknown member or a new incarnation
/// it asks that member for its whole state, which replaces what it held.
/// Heartbeats carry the member's version, so a lost diff is noticed within a
/// heartbeat even when nothing else changes.
enum ClusterMessage: Sendable, Equatable {
    case heartbeat(Heartbeat)
    case presenceDiff(PresenceDiff)
    case presenceState(PresenceState)
    /// `requester` asks `member` to publish its whole presence state.
    case stateRequest(member: String, requester: String)
    case broadcast(Broadcast)
    /// Where a Supabase channel stopped when its socket closed on `member`, so
    /// that its client may rejoin on any member and continue from there.
    case resumePosition(member: String, key: ResumeBook.Key, eventID: String)

    struct Heartbeat: Sendable, Equatable {
        var member: String
        var incarnation: String
        var version: UInt64
        /// `database`: reads the journal itself.
        var role: String
        /// The last event id its broker published, if any.
        var lastEventID: String?
        /// Broadcast topic members connected to it.
        var channels: Int
        /// An edge's last stream sequence read, and how far the stream's head is past it.
        var streamSequence: UInt64? = nil
        var streamLag: UInt64? = nil
    }

    struct PresenceDiff: Sendable, Equatable {
        var member: String
        var incarnation: String
        var version: UInt64
        var topic: BroadcastHub.Topic
        var joins: [PresenceEntry]
        var leaves: [PresenceEntry]
    }

    struct PresenceState: Sendable, Equatable {
        var member: String
        var incarnation: String
        var version: UInt64
        var entries: [BroadcastHub.Topic: [PresenceEntry]]
        /// This message's place among the parts of one state (1 of 1 when
        /// whole): a state larger than the NATS server's `max_payload` goes
        /// out in parts (``PresenceStateSplitter``), applied once all arrived.
        var part: Int = 1
        var parts: Int = 1
    }

    /// A client broadcast made on `member`, for the topic's members elsewhere.
    struct Broadcast: Sendable, Equatable {
        var member: String
        var topic: BroadcastHub.Topic
        var message: PhoenixMessage
    }

    /// The member that sent it.
    var sender: String {
        switch self {
        case .heartbeat(let heartbeat): heartbeat.member
        case .presenceDiff(let diff): diff.member
        case .presenceState(let state): state.member
        case .stateRequest(_, let requester): requester
        case .broadcast(let broadcast): broadcast.member
        case .resumePosition(let member, _, _): member
        }
    }
}

extension ClusterMessage {
    var json: JSONValue {
        switch self {
        case .heartbeat(let heartbeat):
            var object: JSONObject = [
                "type": .string("heartbeat"), "member": .string(heartbeat.member), "incarnation": .string(heartbeat.incarnation),
                "version": .number(JSONNumber(Int64(heartbeat.version))), "role": .string(heartbeat.role),
                "channels": .number(JSONNumber(Int64(heartbeat.channels))),
            ]
            if let last = heartbeat.lastEventID { object["last_event_id"] = .string(last) }
            if let sequence = heartbeat.streamSequence { object["stream_sequence"] = .number(JSONNumber(Int64(sequence))) }
            if let lag = heartbeat.streamLag { object["stream_lag"] = .number(JSONNumber(Int64(lag))) }
            return .object(object)
        case .presenceDiff(let diff):
            return .object([
                "type": .string("presence_diff"), "member": .string(diff.member), "incarnation": .string(diff.incarnation),
                "version": .number(JSONNumber(Int64(diff.version))), "topic": Self.json(diff.topic),
                "joins": .array(diff.joins.map(\.json)), "leaves": .array(diff.leaves.map(\.json)),
            ])
        case .presenceState(let state):
            let topics = state.entries.sorted { ($0.key.name, $0.key.isPrivate ? 1 : 0) < ($1.key.name, $1.key.isPrivate ? 1 : 0) }
            var object: JSONObject = [
                "type": .string("presence_state"), "member": .string(state.member), "incarnation": .string(state.incarnation),
                "version": .number(JSONNumber(Int64(state.version))),
                "topics": .array(topics.map { Self.json(topic: $0.key, entries: $0.value) }),
            ]
            // Absent for a whole state, as members before parts send it.
            if state.parts != 1 {
                object["part"] = .number(JSONNumber(Int64(state.part)))
                object["parts"] = .number(JSONNumber(Int64(state.parts)))
            }
            return .object(object)
        case .stateRequest(let member, let requester):
            return .object(["type": .string("state_request"), "member": .string(member), "requester": .string(requester)])
        case .resumePosition(let member, let key, let eventID):
            return .object([
                "type": .string("resume_position"), "member": .string(member), "caller": .string(key.caller), "topic": .string(key.topic),
                "bindings": .string(key.bindings), "event_id": .string(eventID),
            ])
        case .broadcast(let broadcast):
            return .object([
                "type": .string("broadcast"), "member": .string(broadcast.member), "topic": Self.json(broadcast.topic),
                "event": .string(broadcast.message.event), "payload": broadcast.message.payload,
            ])
        }
    }

    /// The message in `bytes`, or nil for anything else (a newer member's message type among them).
    init?(bytes: [UInt8]) {
        guard let value = try? JSONParser.parse(bytes), let type = value["type"]?.stringValue,
              let member = value["member"]?.stringValue else { return nil }
        func number(_ key: String) -> UInt64? { value[key].flatMap { if case .number(let n) = $0 { UInt64(n.text) } else { nil } } }
        func version() -> UInt64? { number("version") }
        switch type {
        case "heartbeat":
            guard let incarnation = value["incarnation"]?.stringValue, let version = version(), let role = value["role"]?.stringValue,
                  case .number(let channels)? = value["channels"], let count = Int(channels.text) else { return nil }
            self = .heartbeat(Heartbeat(
                member: member, incarnation: incarnation, version: version, role: role,
                lastEventID: value["last_event_id"]?.stringValue, channels: count,
                streamSequence: number("stream_sequence"), streamLag: number("stream_lag")
            ))
        case "presence_diff":
            guard let incarnation = value["incarnation"]?.stringValue, let version = version(),
                  let topic = value["topic"].flatMap(Self.topic), let joins = value["joins"]?.arrayValue, let leaves = value["leaves"]?.arrayValue
            else { return nil }
            let joined = joins.compactMap(PresenceEntry.init(json:)), left = leaves.compactMap(PresenceEntry.init(json:))
            guard joined.count == joins.count, left.count == leaves.count else { return nil }
            self = .presenceDiff(PresenceDiff(member: member, incarnation: incarnation, version: version, topic: topic, joins: joined, leaves: left))
        case "presence_state":
            guard let incarnation = value["incarnation"]?.stringValue, let version = version(), let topics = value["topics"]?.arrayValue else { return nil }
            var entries: [BroadcastHub.Topic: [PresenceEntry]] = [:]
            for item in topics {
                guard let topic = item["topic"].flatMap(Self.topic), let list = item["entries"]?.arrayValue else { return nil }
                let parsed = list.compactMap(PresenceEntry.init(json:))
                guard parsed.count == list.count else { return nil }
                entries[topic, default: []] += parsed
            }
            guard let part = Int(exactly: number("part") ?? 1), let parts = Int(exactly: number("parts") ?? 1),
                  parts >= 1, (1...parts).contains(part) else { return nil }
            self = .presenceState(PresenceState(member: member, incarnation: incarnation, version: version, entries: entries, part: part, parts: parts))
        case "state_request":
            guard let requester = value["requester"]?.stringValue else { return nil }
            self = .stateRequest(member: member, requester: requester)
        case "broadcast":
            guard let topic = value["topic"].flatMap(Self.topic), let event = value["event"]?.stringValue, let payload = value["payload"] else { return nil }
            self = .broadcast(Broadcast(member: member, topic: topic, message: .push(topic: topic.name, event: event, payload: payload)))
        case "resume_position":
            guard let caller = value["caller"]?.stringValue, let topic = value["topic"]?.stringValue,
                  let bindings = value["bindings"]?.stringValue, let eventID = value["event_id"]?.stringValue else { return nil }
            self = .resumePosition(member: member, key: ResumeBook.Key(caller: caller, topic: topic, encodedBindings: bindings), eventID: eventID)
        default:
            return nil
        }
    }

    /// One topic's entries within a `presence_state`.
    static func json(topic: BroadcastHub.Topic, entries: [PresenceEntry]) -> JSONValue {
        .object(["topic": Self.json(topic), "entries": .array(entries.map(\.json))])
    }

    private static func json(_ topic: BroadcastHub.Topic) -> JSONValue {
        .object(["name": .string(topic.name), "private": .bool(topic.isPrivate)])
    }

    private static func topic(_ value: JSONValue) -> BroadcastHub.Topic? {
        guard let name = value["name"]?.stringValue, case .bool(let isPrivate)? = value["private"] else { return nil }
        return BroadcastHub.Topic(name: name, isPrivate: isPrivate)
    }
}
