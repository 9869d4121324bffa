import Herald

extension ClusterLink {
    /// Every member heard from within the timeout, this one first, each with
    /// how far its broker is behind the member furthest ahead.
    func clusterStatistics(now: ContinuousClock.Instant) -> ClusterStatistics {
        let counts = counters.withLock { $0 }
        let local = hubReference?.localCounts() ?? (version: 0, channels: 0, presences: 0)
        let feed = health.position
        var members = [ClusterStatistics.Member(
            name: member, role: role, isSelf: true, heardSecondsAgo: 0, lastEventID: broker.lastResumableEventID,
            channels: local.channels, presences: local.presences, streamSequence: feed?.position, streamLag: feed?.lag
        )]
        for (name, heard) in (hubReference?.clusterMembers() ?? [:]).sorted(by: { $0.key < $1.key }) {
            let silence = now - heard.lastHeard
            members.append(ClusterStatistics.Member(
                name: name, role: heard.heartbeat?.role ?? "unknown", isSelf: false,
                heardSecondsAgo: Double(silence.components.seconds) + Double(silence.components.attoseconds) / 1e18,
                lastEventID: heard.heartbeat?.lastEventID, channels: heard.heartbeat?.channels ?? 0,
                presences: heard.entries.values.reduce(0) { $0 + $1.count },
                streamSequence: heard.heartbeat?.streamSequence, streamLag: heard.heartbeat?.streamLag
            ))
        }
        let furthest = members.compactMap { $0.lastEventID.flatMap(UInt64.init) }.max()
        for index in members.indices {
            if let furthest, let position = members[index].lastEventID.flatMap(UInt64.init) { members[index].lag = furthest - position }
        }
        return ClusterStatistics(
            name: configuration.name, server: counts.server, members: members, broadcastsSent: counts.broadcastsSent,
            broadcastsReceived: counts.broadcastsReceived, presenceSent: counts.presenceSent, presenceReceived: counts.presenceReceived,
            stateRequests: counts.stateRequests
        )
    }
}
