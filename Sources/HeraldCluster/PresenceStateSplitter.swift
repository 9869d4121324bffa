import Herald

/// Cuts a member's whole presence state into `presence_state` messages of
/// at most `maximumPayload` bytes each, the NATS server's `max_payload`:
/// nats-server closes a connection that publishes more, so one large state
/// would cut the member off the cluster again and again.
///
/// Entries are packed in order, topic by topic, as many to a part as fit; a
/// topic may span parts, and the receiver joins the parts before it applies
/// them. An entry that cannot fit in a part of its own is left out and
/// returned (tracking refuses such an entry, so only a server whose limit
/// shrank under a running daemon leaves one behind). Pure.
struct PresenceStateSplitter: Sendable {
    /// The largest message the NATS server takes, in bytes.
    let maximumPayload: Int

    struct Result: Sendable, Equatable {
        /// In order, numbered 1 to `parts.count`; one empty part when nothing is tracked.
        var parts: [ClusterMessage.PresenceState]
        /// Entries too large for any part.
        var omitted: [PresenceEntry]
    }

    func split(_ state: ClusterMessage.PresenceState) -> Result {
        // A part's size without topics, its numbers at their widest, so that any numbering fits.
        var empty = state
        empty.entries = [:]
        empty.part = Self.widestPartNumber
        empty.parts = Self.widestPartNumber
        let envelope = ClusterMessage.presenceState(empty).json.jsonText.utf8.count

        var groups: [[BroadcastHub.Topic: [PresenceEntry]]] = []
        var current: [BroadcastHub.Topic: [PresenceEntry]] = [:]
        var size = envelope
        var omitted: [PresenceEntry] = []
        let topics = state.entries.keys.sorted { ($0.name, $0.isPrivate ? 1 : 0) < ($1.name, $1.isPrivate ? 1 : 0) }
        for topic in topics {
            // `{"topic":…,"entries":[]}`, and a comma before it unless it opens the part.
            let header = ClusterMessage.json(topic: topic, entries: []).jsonText.utf8.count
            for entry in state.entries[topic] ?? [] {
                let bytes = entry.json.jsonText.utf8.count
                guard envelope + header + bytes <= maximumPayload else {
                    omitted.append(entry)
                    continue
                }
                let opensTopic = current[topic] == nil
                let added = bytes + (opensTopic ? header + (current.isEmpty ? 0 : 1) : 1)
                if size + added > maximumPayload {
                    groups.append(current)
                    current = [:]
                    size = envelope
                }
                let opensAfresh = current[topic] == nil
                size += bytes + (opensAfresh ? header + (current.isEmpty ? 0 : 1) : 1)
                current[topic, default: []].append(entry)
            }
        }
        if !current.isEmpty || groups.isEmpty { groups.append(current) }
        let parts = groups.enumerated().map { index, entries in
            var part = state
            part.entries = entries
            part.part = index + 1
            part.parts = groups.count
            return part
        }
        return Result(parts: parts, omitted: omitted)
    }

    /// Wide enough for any count of parts a state can have.
    private static let widestPartNumber = 999_999_999
}
