#if canImport(Glibc)
import Glibc
public import Herald
public import HeraldOutput
public import HeraldSettings
import HeraldSupabase
import Logging
#endif

extension SocketServer: Output {
    /// Section `socket`: on by default; `socket.enabled: false` turns it off.
    public static let section = "socket"
    /// Its settings need a restart, but for the TLS certificate, which a
    /// reload reads again; the `access` rules it enforces are reloaded apart (see ``apply(access:)``).
    public static let reloadableKeys: [String] = ["tls."]

    public static func configuration(from settings: SettingsReader) throws(ConfigurationError) -> SocketConfiguration? {
        try SocketConfiguration.read(from: settings)
    }

    /// Also serves the Supabase endpoint built before it, and raises the open-file limit to what its streams need.
    public convenience init(configuration: SocketConfiguration, context: OutputContext) {
        Self.raiseOpenFileLimit(toServe: configuration.maximumSubscribers, logger: context.logger)
        self.init(
            configuration: configuration, broker: context.broker, health: context.source.health, catalog: context.catalog,
            journal: context.journal, maintenance: context.maintenance, metrics: context.metrics, outputs: context.outputs,
            realtime: context.outputs.first(RealtimeEndpoint.self), rowSecurity: context.rowSecurity, access: context.access, version: context.version,
            logger: context.logger
        )
    }

    /// Reads the TLS certificate and key again, whether or not their paths changed: renewals keep the path.
    public func reload(_ configuration: SocketConfiguration) async {
        reloadCertificates()
    }

    public var report: OutputReport {
        let top = streams.withLock { ledger in
            ledger.top(Self.consumersShown).map { ($0.holder, $0.streams, ledger.conditions[$0.holder] ?? 0) }
        }
        let metrics = top.flatMap { holder, count, conditions in
            [
                OutputReport.Metric(
                    "pgherald_socket_consumer_streams", .gauge(Double(count)), labels: [("consumer", holder.description)],
                    help: "Streams (/events, /queries) of the keys, users and addresses holding the most over the network (the top \(Self.consumersShown))."
                ),
                OutputReport.Metric(
                    "pgherald_socket_consumer_conditions", .gauge(Double(conditions)), labels: [("consumer", holder.description)],
                    help: "What the where= conditions of the same holders' streams cost together (socket.max_conditions_per_key, _per_user, _per_address)."
                ),
            ]
        }
        return OutputReport(statistics: OutputStatistics(feed: .live, delivered: eventsWritten.load(ordering: .relaxed)), metrics: metrics)
    }

    /// How many of the top holders of streams `/stats` and `/metrics` list.
    static let consumersShown = 10

    public func contribute(to statistics: inout DaemonStatistics) {
        let top = streams.withLock { ledger in
            ledger.top(Self.consumersShown).map { ($0.holder, $0.streams, ledger.conditions[$0.holder] ?? 0) }
        }
        guard !top.isEmpty else { return }
        statistics.streamConsumers = top.map { .init(consumer: $0.description, streams: $1, conditions: $2) }
    }

    /// Each stream holds a descriptor; raise the soft limit as far as the hard
    /// limit allows, and say so when even that is too low.
    static func raiseOpenFileLimit(toServe streams: Int, logger: Logger) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        let wanted = rlim_t(streams + 256)
        if limit.rlim_cur < wanted {
            limit.rlim_cur = min(wanted, limit.rlim_max)
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        if limit.rlim_cur < wanted {
            logger.warning("the open-file limit is below what socket.max_subscribers needs", metadata: [
                "limit": "\(limit.rlim_cur)", "needed": "\(wanted)",
            ])
        }
    }
}
