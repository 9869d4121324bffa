import Synchronization

/// The cluster link's current ``ClusterMessageBudget``, shared with the hub
/// that checks tracks and broadcasts against it: the link sets the NATS
/// server's `max_payload` on every connection, since servers of one list
/// may differ.
final class ClusterMessageLimit: Sendable {
    let member: String
    let incarnation: String
    private let maximumPayload = Atomic<Int>(ClusterMessageBudget.defaultMaximumPayload)

    init(member: String, incarnation: String) {
        self.member = member
        self.incarnation = incarnation
    }

    var budget: ClusterMessageBudget {
        ClusterMessageBudget(maximumPayload: maximumPayload.load(ordering: .relaxed), member: member, incarnation: incarnation)
    }

    /// What the server the link connected to takes, from its INFO.
    func serverTakes(_ bytes: Int) {
        maximumPayload.store(bytes, ordering: .relaxed)
    }
}
