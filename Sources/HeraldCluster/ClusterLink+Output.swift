import Foundation
public import Herald
public import HeraldOutput
public import HeraldSettings

extension ClusterLink: Output {
    /// Section `cluster`; off without `cluster.name`.
    public static let section = "cluster"
    public static let reloadableKeys: [String] = []

    public static func configuration(from settings: SettingsReader) throws(ConfigurationError) -> ClusterConfiguration? {
        let servers = try settings.natsServers("cluster.nats")
        let member = settings.string("cluster.member")
        if let member, member.isEmpty || member.count > 200 {
            throw settings.fail("cluster.member", "a member's name is 1 to 200 characters")
        }
        let heartbeat = try settings.value("cluster.heartbeat", default: "1s" as HumanDuration, expected: "a duration such as 1s")
        let timeout = try settings.value("cluster.member_timeout", default: "5s" as HumanDuration, expected: "a duration such as 5s")
        guard heartbeat.duration >= .milliseconds(100) else { throw settings.fail("cluster.heartbeat", "at least 100ms") }
        guard timeout.duration >= heartbeat.duration * 3 else {
            throw settings.fail("cluster.member_timeout", "at least three heartbeats (\(heartbeat) each), so that one lost heartbeat does not make a member leave")
        }
        let authentication = try settings.natsAuthentication(under: "cluster")
        let tls = try settings.natsTLS(under: "cluster")
        let stream = settings.string("cluster.stream")
        if let stream, stream.isEmpty || !stream.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) {
            throw settings.fail("cluster.stream", "a stream's name is letters, digits, - and _")
        }
        guard let name = settings.string("cluster.name") else { return nil }
        guard !name.isEmpty, name.count <= 64, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else {
            throw settings.fail("cluster.name", "a cluster's name is 1 to 64 letters, digits, - and _ (it is part of NATS subjects)")
        }
        return ClusterConfiguration(
            name: name, servers: servers, member: member, heartbeat: heartbeat.duration, memberTimeout: timeout.duration,
            authentication: authentication, tls: tls, stream: stream
        )
    }

    public convenience init(configuration: ClusterConfiguration, context: OutputContext) {
        self.init(
            configuration: configuration, member: configuration.member ?? Self.defaultMember(daemonName: context.daemonName),
            broker: context.broker, health: context.source.health, sourceOffers: context.source.offers, version: context.version, logger: context.logger
        )
    }

    public func reload(_ configuration: ClusterConfiguration) async {}

    /// `HOSTNAME/NAME/PID`: daemons on one host under one `--name` (a
    /// database daemon and its edges, say) are members apart, where
    /// `HOSTNAME/NAME` made them one member that heard nobody.
    static func defaultMember(daemonName: String) -> String {
        "\(ProcessInfo.processInfo.hostName)/\(daemonName)/\(ProcessInfo.processInfo.processIdentifier)"
    }

    public var report: OutputReport {
        let counts = counters.withLock { $0 }
        let twin = twinProblem(now: .now)
        return OutputReport(
            statistics: OutputStatistics(
                health: counts.server == nil || twin != nil ? "degraded" : "ok",
                reason: counts.server == nil ? (counts.problem ?? "not connected to NATS yet") : twin,
                feed: .live, delivered: counts.broadcastsReceived
            ),
            metrics: [
                .init("pgherald_cluster_members", .gauge(Double(memberCount)), help: "Cluster members heard from within the member timeout, this one included."),
                .init("pgherald_cluster_broadcasts_sent_total", .counter(Int64(counts.broadcastsSent)), help: "Client broadcasts sent to the other members."),
                .init("pgherald_cluster_broadcasts_received_total", .counter(Int64(counts.broadcastsReceived)), help: "Client broadcasts received from the other members."),
                .init("pgherald_cluster_presence_sent_total", .counter(Int64(counts.presenceSent)), help: "Presence changes and whole states sent."),
                .init("pgherald_cluster_presence_received_total", .counter(Int64(counts.presenceReceived)), help: "Presence changes and whole states received."),
                .init("pgherald_cluster_state_requests_total", .counter(Int64(counts.stateRequests)), help: "Whole presence states asked for after a gap, a new member or a restart."),
                .init("pgherald_cluster_oversized_total", .counter(Int64(counts.oversized)), help: "Cluster messages not sent for being larger than the NATS server's max_payload."),
                .init("pgherald_cluster_failures_total", .counter(Int64(counts.failures)), help: "Connections to the cluster's NATS servers that failed or broke."),
            ]
        )
    }

    private var memberCount: Int { 1 + (hubReference?.clusterMembers().count ?? 0) }

    /// The cluster as this member sees it, under `cluster` in `/stats`.
    public func contribute(to statistics: inout DaemonStatistics) {
        statistics.cluster = clusterStatistics(now: .now)
    }
}
