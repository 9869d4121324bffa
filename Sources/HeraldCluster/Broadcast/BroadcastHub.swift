import Foundation
package import Herald
package import HeraldRealtime
package import Logging
import Synchronization

/// The members of each broadcast topic on this daemon, their presence, and
/// the hand-off of messages to them. A member's frames wait in a bounded
/// inbox that its channel's task writes out, bounded in frames
/// (``backlog``) and, with its socket's other channels, in bytes
/// (``SocketBudget``); a member that stops reading misses what comes once
/// either is full, and never slows the sender or the others.
///
/// In a cluster (``ClusterLink``) the hub also hands its clients' broadcasts
/// and presence changes to the link, and takes the other members' in:
/// presence a client sees is the union of every member's.
package final class BroadcastHub: Sendable {
    /// A topic as clients join it (`realtime:NAME`): a private topic and a
    /// public one of the same name are apart, so that joining the public one
    /// never reaches what only callers granted the private one may see.
    package struct Topic: Sendable, Hashable {
        var name: String
        var isPrivate: Bool

        package init(name: String, isPrivate: Bool) {
            self.name = name
            self.isPrivate = isPrivate
        }

        // Byte for byte, as `realtime.messages` policies compare topics: `Åsa` with one character
        // and with a combining ring are two rooms, which String equality would join.
        package static func == (lhs: Topic, rhs: Topic) -> Bool {
            lhs.isPrivate == rhs.isPrivate && lhs.name.hasSameBytes(as: rhs.name)
        }

        package func hash(into hasher: inout Hasher) {
            hasher.combine(isPrivate)
            hasher.combine(exactly: name)
        }
    }

    struct Member: Sendable {
        let framing: PhoenixFraming
        /// `self`: it receives what its own channel sends.
        let echo: Bool
        let inbox: AsyncStream<[UInt8]>.Continuation
        /// Its socket's bytes waiting, and its own place in them.
        let budget: SocketBudget
        let channel: ObjectIdentifier
        var presence: PresenceEntry?
    }

    struct State: Sendable {
        var topics: [Topic: [ObjectIdentifier: Member]] = [:]
        /// Counts this daemon's presence changes, which the cluster numbers by it.
        var presenceVersion: UInt64 = 0
        /// The other members' presence; empty outside a cluster.
        var cluster: ClusterPresenceBook
        /// Each topic's `presence_state` as framed for a join, until its presence changes: every
        /// join of a crowded topic would otherwise build and encode the whole state again.
        var presenceStates: [Topic: [PhoenixFraming: [UInt8]]] = [:]
        /// Counts changes of any topic's presence, so that a state built meanwhile is not kept.
        var presenceChanges: UInt64 = 0

        /// `topic`'s presence changed: its framed state is out of date.
        mutating func presenceChanged(on topic: Topic) {
            presenceStates[topic] = nil
            presenceChanges &+= 1
        }
    }

    /// Frames a member may have waiting.
    static let backlog = 1024
    let state: Mutex<State>
    let relay: ClusterLink.Relay?
    /// Tells of each episode of a member missing frames, once.
    let logger: Logger
    private let missed = Atomic<UInt64>(0)

    /// - Parameter relay: where this daemon's broadcasts and presence changes go for the other members; nil outside a cluster.
    package init(relay: ClusterLink.Relay? = nil, logger: Logger) {
        self.relay = relay
        self.logger = logger
        state = Mutex(State(cluster: ClusterPresenceBook(memberTimeout: relay?.memberTimeout ?? .seconds(5))))
    }

    /// Adds `channel` to `topic`; its frames, until ``leave(_:channel:)``.
    /// The reader gives each frame's bytes back to `budget` once written.
    package func join(_ topic: Topic, channel: ObjectIdentifier, framing: PhoenixFraming, echo: Bool, budget: SocketBudget) -> AsyncStream<[UInt8]> {
        let (frames, inbox) = AsyncStream<[UInt8]>.makeStream(bufferingPolicy: .bufferingOldest(Self.backlog))
        budget.open(channel)
        let member = Member(framing: framing, echo: echo, inbox: inbox, budget: budget, channel: channel)
        let replaced = state.withLock { state in
            state.topics[topic, default: [:]].updateValue(member, forKey: channel)
        }
        replaced?.inbox.finish()
        return frames
    }

    /// Removes `channel` from `topic`; what it tracked leaves, as a client that vanishes does.
    package func leave(_ topic: Topic, channel: ObjectIdentifier) {
        let (member, others) = state.withLock { state -> (Member?, [Member]) in
            let member = state.topics[topic]?.removeValue(forKey: channel)
            if state.topics[topic]?.isEmpty == true { state.topics[topic] = nil }
            if let left = member?.presence { state.announce(topic, joins: [], leaves: [left], through: relay) }
            if member?.presence != nil || state.topics[topic] == nil { state.presenceChanged(on: topic) }
            // Only a leave that others see needs them: copying every member on each leave made
            // 15,000 channels of one topic take 38 s of both cores to close.
            guard member?.presence != nil else { return (member, []) }
            return (member, Array((state.topics[topic] ?? [:]).values))
        }
        member?.inbox.finish()
        if let left = member?.presence {
            send(diff(topic, joins: [], leaves: [left]), on: topic, to: others)
        }
    }

    /// Hands `message` to every member of `topic` but `sender` (unless that one
    /// asked for `self`), and to the topic's members on the other cluster members.
    package func publish(_ message: PhoenixMessage, to topic: Topic, from sender: ObjectIdentifier?) {
        let members = state.withLock { $0.topics[topic] ?? [:] }
        send(message, on: topic, to: members.filter { $0.key != sender || $0.value.echo }.map(\.value))
        relay?.outbound.yield(.broadcast(topic, message))
    }

    /// Tracks `meta` for `channel` under `key`, replacing what it tracked, or untracks it (nil);
    /// every member, the channel's own included, gets the difference.
    package func track(_ topic: Topic, channel: ObjectIdentifier, key: String, meta: JSONValue?) {
        let tracked = meta.map { PresenceEntry(key: key, meta: $0) }
        let (previous, members) = state.withLock { state -> (PresenceEntry?, [Member]) in
            guard var member = state.topics[topic]?[channel] else { return (nil, []) }
            let previous = member.presence
            member.presence = tracked
            state.topics[topic]?[channel] = member
            if tracked != nil || previous != nil {
                state.announce(topic, joins: tracked.map { [$0] } ?? [], leaves: previous.map { [$0] } ?? [], through: relay)
                state.presenceChanged(on: topic)
            }
            return (previous, Array((state.topics[topic] ?? [:]).values))
        }
        guard tracked != nil || previous != nil else { return }
        send(diff(topic, joins: tracked.map { [$0] } ?? [], leaves: previous.map { [$0] } ?? []), on: topic, to: members)
    }

    /// Everyone tracked on `topic`, here and on the other cluster members, as
    /// `presence_state` carries it: each key with its metas.
    private static func presenceState(_ topic: Topic, of tracked: [PresenceEntry]) -> PhoenixMessage {
        var entries: [String: [JSONValue]] = [:]
        for presence in tracked { entries[presence.key, default: []].append(presence.phoenixMeta) }
        return .push(topic: topic.name, event: "presence_state", payload: Self.byKey(entries))
    }

    /// Sends `topic`'s whole presence state to the member `channel` as its other frames go: after
    /// them, and counted in its socket's budget, so that a client that joins topics with a large
    /// state and never reads holds at most its budget, not one state a join.
    package func sendPresenceState(_ topic: Topic, to channel: ObjectIdentifier) {
        let found = state.withLock { state -> (member: Member, framed: [UInt8]?, tracked: [PresenceEntry], changes: UInt64)? in
            guard let member = state.topics[topic]?[channel] else { return nil }
            if let framed = state.presenceStates[topic]?[member.framing] { return (member, framed, [], state.presenceChanges) }
            let tracked = (state.topics[topic] ?? [:]).values.compactMap(\.presence) + state.cluster.entries(on: topic)
            return (member, nil, tracked, state.presenceChanges)
        }
        guard let found else { return }
        if let framed = found.framed { return send(frame: framed, on: topic, to: found.member) }
        let frame = found.member.framing.encode(Self.presenceState(topic, of: found.tracked))
        // Kept only if no presence changed while it was built: the next join builds it again.
        state.withLock { state in
            if state.presenceChanges == found.changes, state.topics[topic] != nil {
                state.presenceStates[topic, default: [:]][found.member.framing] = frame
            }
        }
        send(frame: frame, on: topic, to: found.member)
    }

    func diff(_ topic: Topic, joins: [PresenceEntry], leaves: [PresenceEntry]) -> PhoenixMessage {
        func grouped(_ entries: [PresenceEntry]) -> [String: [JSONValue]] {
            var byKey: [String: [JSONValue]] = [:]
            for entry in entries { byKey[entry.key, default: []].append(entry.phoenixMeta) }
            return byKey
        }
        return .push(topic: topic.name, event: "presence_diff", payload: .object([
            "joins": Self.byKey(grouped(joins)), "leaves": Self.byKey(grouped(leaves)),
        ]))
    }

    private static func byKey(_ entries: [String: [JSONValue]]) -> JSONValue {
        var object = JSONObject()
        for (key, metas) in entries.sorted(by: { $0.key < $1.key }) { object[key] = .object(["metas": .array(metas)]) }
        return .object(object)
    }

    /// Frames members missed since the daemon started: each one past a
    /// member's inbox of ``backlog`` frames, or its socket's budget.
    package var missedFrames: UInt64 { missed.load(ordering: .relaxed) }

    /// A member whose inbox is full, or whose socket has its budget of bytes waiting, misses `message`.
    func send(_ message: PhoenixMessage, on topic: Topic, to members: [Member]) {
        var frames: [PhoenixFraming: [UInt8]] = [:]
        for member in members {
            let frame = frames[member.framing] ?? member.framing.encode(message)
            frames[member.framing] = frame
            send(frame: frame, on: topic, to: member)
        }
    }

    /// One framed message to one member, within its inbox and its socket's budget.
    private func send(frame: [UInt8], on topic: Topic, to member: Member) {
        switch member.budget.reserve(frame.count, for: member.channel) {
        case .reserved:
            switch member.inbox.yield(frame) {
            case .enqueued: break
            case .dropped:
                let startsEpisode = member.budget.miss(frame.count, for: member.channel)
                recordMiss(on: topic, limit: "its \(Self.backlog) frames waiting", startsEpisode: startsEpisode)
            case .terminated: member.budget.release(frame.count, for: member.channel)
            @unknown default: member.budget.release(frame.count, for: member.channel)
            }
        case .missed(let startsEpisode):
            recordMiss(on: topic, limit: "realtime.max_queued_bytes (\(member.budget.maximumBytes)) waiting on its socket", startsEpisode: startsEpisode)
        case .closed:
            break
        }
    }

    /// Counts a missed frame; logs the first of an episode, which lasts until the member has nothing waiting.
    private func recordMiss(on topic: Topic, limit: String, startsEpisode: Bool) {
        missed.wrappingAdd(1, ordering: .relaxed)
        guard startsEpisode else { return }
        logger.notice("a realtime channel misses frames: its client reads slower than they come", metadata: [
            "topic": "\(topic.name)", "private": "\(topic.isPrivate)", "limit": "\(limit)",
        ])
    }
}
