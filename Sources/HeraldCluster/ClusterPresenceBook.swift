/// The other members' presence as this member has heard it, and when it last
/// heard from each: the receiving half of ``ClusterMessage``'s presence.
/// Pure: the caller passes the time and acts on the outcome.
struct ClusterPresenceBook: Sendable {
    typealias Topic = BroadcastHub.Topic

    /// What one topic's local members are told.
    struct Change: Sendable, Equatable {
        var joins: [PresenceEntry] = []
        var leaves: [PresenceEntry] = []
    }

    /// What a message or the passing of time did.
    struct Outcome: Sendable, Equatable {
        var changes: [Topic: Change] = [:]
        /// Ask this member for its whole state.
        var requestState: String?
    }

    struct Member: Sendable {
        var incarnation: String
        /// Nil until its whole state arrived (or it said it never tracked anything).
        var version: UInt64?
        var entries: [Topic: [PresenceEntry]] = [:]
        var lastHeard: ContinuousClock.Instant
        var heartbeat: ClusterMessage.Heartbeat?
        var stateRequestedAt: ContinuousClock.Instant?
        /// The parts of a whole state received so far, joined, while more are due.
        var assembling: ClusterMessage.PresenceState?
    }

    /// A member not heard from for this long has left, with everything it tracked.
    let memberTimeout: Duration
    /// At most one state request per member in this time: answers cross in flight.
    let stateRequestInterval: Duration
    private(set) var members: [String: Member] = [:]

    init(memberTimeout: Duration, stateRequestInterval: Duration = .seconds(1)) {
        self.memberTimeout = memberTimeout
        self.stateRequestInterval = stateRequestInterval
    }

    /// Every entry other members track on `topic`.
    func entries(on topic: Topic) -> [PresenceEntry] {
        members.keys.sorted().flatMap { members[$0]?.entries[topic] ?? [] }
    }

    mutating func receive(_ message: ClusterMessage, now: ContinuousClock.Instant) -> Outcome {
        var outcome = Outcome()
        switch message {
        case .heartbeat(let heartbeat):
            meet(heartbeat.member, incarnation: heartbeat.incarnation, now: now, &outcome)
            members[heartbeat.member]?.heartbeat = heartbeat
            if members[heartbeat.member]?.version == nil, heartbeat.version == 0 {
                members[heartbeat.member]?.version = 0
            }
            if members[heartbeat.member]?.version != heartbeat.version { request(heartbeat.member, now: now, &outcome) }
        case .presenceDiff(let diff):
            meet(diff.member, incarnation: diff.incarnation, now: now, &outcome)
            guard let known = members[diff.member]?.version else {
                request(diff.member, now: now, &outcome)
                break
            }
            if diff.version <= known { break }
            guard diff.version == known + 1 else {
                request(diff.member, now: now, &outcome)
                break
            }
            let left = Set(diff.leaves.map(\.reference))
            var entries = members[diff.member]?.entries[diff.topic] ?? []
            let removed = entries.filter { left.contains($0.reference) }
            entries.removeAll { left.contains($0.reference) }
            entries += diff.joins
            members[diff.member]?.entries[diff.topic] = entries.isEmpty ? nil : entries
            members[diff.member]?.version = diff.version
            outcome.add(Change(joins: diff.joins, leaves: removed), on: diff.topic)
        case .presenceState(let state):
            meet(state.member, incarnation: state.incarnation, now: now, &outcome)
            if let known = members[state.member]?.version, known >= state.version { break }
            guard let state = assemble(state) else { break }
            let previous = members[state.member]?.entries ?? [:]
            for topic in Set(previous.keys).union(state.entries.keys) {
                let before = previous[topic] ?? [], after = state.entries[topic] ?? []
                let beforeReferences = Set(before.map(\.reference)), afterReferences = Set(after.map(\.reference))
                outcome.add(Change(
                    joins: after.filter { !beforeReferences.contains($0.reference) },
                    leaves: before.filter { !afterReferences.contains($0.reference) }
                ), on: topic)
            }
            members[state.member]?.entries = state.entries.filter { !$0.value.isEmpty }
            members[state.member]?.version = state.version
        case .stateRequest(_, let requester):
            members[requester]?.lastHeard = now
        case .broadcast(let broadcast):
            members[broadcast.member]?.lastHeard = now
        case .resumePosition(let member, _, _):
            members[member]?.lastHeard = now
        }
        return outcome
    }

    /// Members silent for longer than ``memberTimeout`` leave, and their entries with them.
    mutating func expire(now: ContinuousClock.Instant) -> (outcome: Outcome, members: [String]) {
        var outcome = Outcome()
        let silent = members.filter { now - $0.value.lastHeard > memberTimeout }.map(\.key).sorted()
        for name in silent {
            for (topic, entries) in members.removeValue(forKey: name)?.entries ?? [:] {
                outcome.add(Change(leaves: entries), on: topic)
            }
        }
        return (outcome, silent)
    }

    /// Notes `member` as heard; a new incarnation takes the place of the old one, whose entries leave.
    private mutating func meet(_ member: String, incarnation: String, now: ContinuousClock.Instant, _ outcome: inout Outcome) {
        if let known = members[member], known.incarnation == incarnation {
            members[member]?.lastHeard = now
            return
        }
        for (topic, entries) in members[member]?.entries ?? [:] { outcome.add(Change(leaves: entries), on: topic) }
        members[member] = Member(incarnation: incarnation, lastHeard: now)
    }

    /// The whole state once its last part arrived, or nil while parts are due.
    /// Parts come in order from one publisher; one missing drops the rest,
    /// and the next heartbeat's version asks for the state again.
    private mutating func assemble(_ state: ClusterMessage.PresenceState) -> ClusterMessage.PresenceState? {
        guard state.parts > 1 else {
            members[state.member]?.assembling = nil
            return state
        }
        if state.part == 1 {
            members[state.member]?.assembling = state
        } else if var joined = members[state.member]?.assembling, joined.version == state.version, joined.parts == state.parts, joined.part + 1 == state.part {
            for (topic, entries) in state.entries { joined.entries[topic, default: []] += entries }
            joined.part = state.part
            members[state.member]?.assembling = joined
        } else {
            members[state.member]?.assembling = nil
            return nil
        }
        guard let joined = members[state.member]?.assembling, joined.part == joined.parts else { return nil }
        members[state.member]?.assembling = nil
        return joined
    }

    private mutating func request(_ member: String, now: ContinuousClock.Instant, _ outcome: inout Outcome) {
        if let asked = members[member]?.stateRequestedAt, now - asked < stateRequestInterval { return }
        members[member]?.stateRequestedAt = now
        outcome.requestState = member
    }
}

extension ClusterPresenceBook.Outcome {
    mutating func add(_ change: ClusterPresenceBook.Change, on topic: ClusterPresenceBook.Topic) {
        guard !change.joins.isEmpty || !change.leaves.isEmpty else { return }
        changes[topic, default: .init()].joins += change.joins
        changes[topic, default: .init()].leaves += change.leaves
    }
}
