import Foundation
import Herald
import HeraldRealtime
import Synchronization

/// The members of each broadcast topic on this daemon, their presence, and
/// the hand-off of messages to them. A member's frames wait in a bounded
/// inbox that its channel's task writes out; a member that stops reading
/// misses what comes once its inbox is full, and never slows the sender or
/// the others.
final class BroadcastHub: Sendable {
    /// A topic as clients join it (`realtime:NAME`): a private topic and a
    /// public one of the same name are apart, so that joining the public one
    /// never reaches what only callers granted the private one may see.
    struct Topic: Sendable, Hashable {
        var name: String
        var isPrivate: Bool
    }

    /// What a channel tracks: its key, a reference unique to this track, and the client's own fields.
    private struct Presence: Sendable {
        let key: String
        let reference: String
        let meta: JSONValue

        /// The meta as Phoenix Presence sends it: the client's fields and `phx_ref`.
        var entry: JSONValue {
            var fields = meta.objectValue ?? JSONObject()
            fields["phx_ref"] = .string(reference)
            return .object(fields)
        }
    }

    private struct Member: Sendable {
        let framing: PhoenixFraming
        /// `self`: it receives what its own channel sends.
        let echo: Bool
        let inbox: AsyncStream<[UInt8]>.Continuation
        var presence: Presence?
    }

    /// Frames a member may have waiting.
    static let backlog = 1024
    private let topics = Mutex<[Topic: [ObjectIdentifier: Member]]>([:])

    /// Adds `channel` to `topic`; its frames, until ``leave(_:channel:)``.
    func join(_ topic: Topic, channel: ObjectIdentifier, framing: PhoenixFraming, echo: Bool) -> AsyncStream<[UInt8]> {
        let (frames, inbox) = AsyncStream<[UInt8]>.makeStream(bufferingPolicy: .bufferingOldest(Self.backlog))
        let replaced = topics.withLock { topics in
            topics[topic, default: [:]].updateValue(Member(framing: framing, echo: echo, inbox: inbox), forKey: channel)
        }
        replaced?.inbox.finish()
        return frames
    }

    /// Removes `channel` from `topic`; what it tracked leaves, as a client that vanishes does.
    func leave(_ topic: Topic, channel: ObjectIdentifier) {
        let (member, others) = topics.withLock { topics -> (Member?, [Member]) in
            let member = topics[topic]?.removeValue(forKey: channel)
            if topics[topic]?.isEmpty == true { topics[topic] = nil }
            return (member, Array((topics[topic] ?? [:]).values))
        }
        member?.inbox.finish()
        if let left = member?.presence {
            send(diff(topic, joins: nil, leaves: left), to: others)
        }
    }

    /// Hands `message` to every member of `topic` but `sender` (unless that one asked for `self`).
    func publish(_ message: PhoenixMessage, to topic: Topic, from sender: ObjectIdentifier?) {
        let members = topics.withLock { $0[topic] ?? [:] }
        send(message, to: members.filter { $0.key != sender || $0.value.echo }.map(\.value))
    }

    /// Tracks `meta` for `channel` under `key`, replacing what it tracked, or untracks it (nil);
    /// every member, the channel's own included, gets the difference.
    func track(_ topic: Topic, channel: ObjectIdentifier, key: String, meta: JSONValue?) {
        let tracked = meta.map { Presence(key: key, reference: Self.reference(), meta: $0) }
        let (previous, members) = topics.withLock { topics -> (Presence?, [Member]) in
            guard var member = topics[topic]?[channel] else { return (nil, []) }
            let previous = member.presence
            member.presence = tracked
            topics[topic]?[channel] = member
            return (previous, Array((topics[topic] ?? [:]).values))
        }
        guard tracked != nil || previous != nil else { return }
        send(diff(topic, joins: tracked, leaves: previous), to: members)
    }

    /// Everyone tracked on `topic`, as `presence_state` carries it: each key with its metas.
    func presenceState(_ topic: Topic) -> PhoenixMessage {
        let tracked = topics.withLock { ($0[topic] ?? [:]).values.compactMap(\.presence) }
        var state: [String: [JSONValue]] = [:]
        for presence in tracked { state[presence.key, default: []].append(presence.entry) }
        return .push(topic: topic.name, event: "presence_state", payload: Self.byKey(state))
    }

    private func diff(_ topic: Topic, joins: Presence?, leaves: Presence?) -> PhoenixMessage {
        .push(topic: topic.name, event: "presence_diff", payload: .object([
            "joins": Self.byKey(joins.map { [$0.key: [$0.entry]] } ?? [:]),
            "leaves": Self.byKey(leaves.map { [$0.key: [$0.entry]] } ?? [:]),
        ]))
    }

    private static func byKey(_ entries: [String: [JSONValue]]) -> JSONValue {
        var object = JSONObject()
        for (key, metas) in entries.sorted(by: { $0.key < $1.key }) { object[key] = .object(["metas": .array(metas)]) }
        return .object(object)
    }

    /// A member whose inbox is full misses `message`.
    private func send(_ message: PhoenixMessage, to members: [Member]) {
        var frames: [PhoenixFraming: [UInt8]] = [:]
        for member in members {
            let frame = frames[member.framing] ?? member.framing.encode(message)
            frames[member.framing] = frame
            member.inbox.yield(frame)
        }
    }

    /// A reference unique to one track, as Phoenix's `phx_ref`.
    private static func reference() -> String {
        Data((0..<12).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
    }
}
