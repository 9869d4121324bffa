import Herald
import HeraldRealtime

/// What fits in one cluster message: the NATS server's `max_payload`, read
/// from its INFO, measured against a message as this member encodes it.
/// nats-server closes a connection that publishes more, so what would not
/// fit is refused where it enters (a track, a client's broadcast), never
/// sent to be cut. Pure.
struct ClusterMessageBudget: Sendable, Equatable {
    /// The largest payload the cluster's NATS server takes, in bytes.
    var maximumPayload: Int
    var member: String
    var incarnation: String

    /// The NATS default, until a server says otherwise.
    static let defaultMaximumPayload = 1 << 20

    func bytes(_ message: ClusterMessage) -> Int {
        message.json.jsonText.utf8.count
    }

    func fits(_ message: ClusterMessage) -> Bool {
        bytes(message) <= maximumPayload
    }

    /// Why `entry` may not be tracked on `topic`, or nil: it must fit in one
    /// message on its own, both as a change and as a part of the whole state.
    func refusal(tracking entry: PresenceEntry, on topic: BroadcastHub.Topic) -> String? {
        let widest = UInt64(Int64.max)
        let diff = ClusterMessage.presenceDiff(.init(member: member, incarnation: incarnation, version: widest, topic: topic, joins: [entry], leaves: []))
        let part = ClusterMessage.presenceState(.init(
            member: member, incarnation: incarnation, version: widest, entries: [topic: [entry]], part: 999_999_999, parts: 999_999_999
        ))
        let needed = max(bytes(diff), bytes(part))
        guard needed > maximumPayload else { return nil }
        return "this presence is \(needed) bytes as a cluster message, more than the cluster's NATS server takes (max_payload \(maximumPayload) bytes): track a smaller meta"
    }

    /// Why `message`, a client's broadcast on `topic`, may not go to the other members, or nil.
    func refusal(broadcast message: PhoenixMessage, on topic: BroadcastHub.Topic) -> String? {
        let needed = bytes(.broadcast(.init(member: member, topic: topic, message: message)))
        guard needed > maximumPayload else { return nil }
        return "this broadcast is \(needed) bytes as a cluster message, more than the cluster's NATS server takes (max_payload \(maximumPayload) bytes)"
    }
}
