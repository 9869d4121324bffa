package import Herald
package import HeraldRealtime

extension BroadcastHub {
    /// Takes in another member's message. A broadcast reaches this daemon's
    /// members of its topic; presence changes are told to them as `presence_diff`.
    /// - Returns: the member to ask for its whole state, when the book needs it.
    func receive(_ message: ClusterMessage, now: ContinuousClock.Instant) -> String? {
        let (outcome, recipients, broadcastMembers) = state.withLock { state in
            let outcome = state.cluster.receive(message, now: now)
            for topic in outcome.changes.keys { state.presenceChanged(on: topic) }
            let recipients = outcome.changes.keys.map { (topic: $0, members: Array((state.topics[$0] ?? [:]).values)) }
            var broadcastMembers: [Member] = []
            if case .broadcast(let broadcast) = message { broadcastMembers = Array((state.topics[broadcast.topic] ?? [:]).values) }
            return (outcome, recipients, broadcastMembers)
        }
        if case .broadcast(let broadcast) = message { send(broadcast.message, on: broadcast.topic, to: broadcastMembers) }
        tell(outcome.changes, to: recipients)
        return outcome.requestState
    }

    /// Members not heard from within the timeout leave, their clients' presence with them.
    /// - Returns: the members that left.
    func expireSilentMembers(now: ContinuousClock.Instant) -> [String] {
        let (expired, recipients) = state.withLock { state in
            let expired = state.cluster.expire(now: now)
            for topic in expired.outcome.changes.keys { state.presenceChanged(on: topic) }
            return (expired, expired.outcome.changes.keys.map { (topic: $0, members: Array((state.topics[$0] ?? [:]).values)) })
        }
        tell(expired.outcome.changes, to: recipients)
        return expired.members
    }

    /// This daemon's own presence, whole, at the version its last change was numbered with.
    func localPresence() -> (version: UInt64, entries: [Topic: [PresenceEntry]]) {
        state.withLock { state in
            (state.presenceVersion, state.topics.compactMapValues { members in
                let entries = members.values.compactMap(\.presence)
                return entries.isEmpty ? nil : entries
            })
        }
    }

    /// Channels joined to topics here, and presence entries they track.
    func localCounts() -> (version: UInt64, channels: Int, presences: Int) {
        state.withLock { state in
            (state.presenceVersion, state.topics.values.reduce(0) { $0 + $1.count },
             state.topics.values.reduce(0) { $0 + $1.values.filter { $0.presence != nil }.count })
        }
    }

    /// Why tracking `meta` under `key` on `topic` is refused, or nil: in a
    /// cluster an entry must fit in one message to the other members.
    package func clusterRefusal(tracking key: String, meta: JSONValue, on topic: Topic) -> String? {
        relay?.limit.budget.refusal(tracking: PresenceEntry(key: key, meta: meta), on: topic)
    }

    /// Why `message` may not be broadcast on `topic`, or nil: in a cluster it
    /// must fit in one message to the other members.
    package func clusterRefusal(broadcast message: PhoenixMessage, on topic: Topic) -> String? {
        relay?.limit.budget.refusal(broadcast: message, on: topic)
    }

    /// The other members as heard.
    func clusterMembers() -> [String: ClusterPresenceBook.Member] {
        state.withLock { $0.cluster.members }
    }

    private func tell(_ changes: [Topic: ClusterPresenceBook.Change], to recipients: [(topic: Topic, members: [Member])]) {
        for (topic, members) in recipients {
            guard let change = changes[topic], !members.isEmpty else { continue }
            send(diff(topic, joins: change.joins, leaves: change.leaves), on: topic, to: members)
        }
    }
}

extension BroadcastHub.State {
    /// Numbers a change of this daemon's presence and hands it to the cluster,
    /// in the order of the numbers (the caller holds the hub's lock).
    mutating func announce(_ topic: BroadcastHub.Topic, joins: [PresenceEntry], leaves: [PresenceEntry], through relay: ClusterLink.Relay?) {
        guard let relay else { return }
        presenceVersion += 1
        relay.outbound.yield(.presence(topic, version: presenceVersion, joins: joins, leaves: leaves))
    }
}
