public import Herald
import HeraldCluster
import HeraldHTTP
public import HeraldOutput
public import HeraldSettings
import ServiceLifecycle

extension RealtimeEndpoint: Output {
    /// Section `realtime`. Always on: the socket serves Supabase clients, and
    /// `realtime.listen` adds a TCP listener.
    public static let section = "realtime"
    public static let reloadableKeys = ["realtime.keys", "realtime.jwt"]

    public static func configuration(from settings: SettingsReader) throws(ConfigurationError) -> RealtimeConfiguration? {
        try RealtimeConfiguration(settings: settings)
    }

    public convenience init(configuration: RealtimeConfiguration, context: OutputContext) {
        self.init(
            configuration: configuration, broker: context.broker, health: context.source.health, catalog: context.catalog,
            rowSecurity: context.rowSecurity, metrics: context.metrics,
            cluster: context.outputs.first(ClusterLink.self), logger: context.logger
        )
    }

    /// Serves TCP when `realtime.listen` says so; the socket's routes are the socket's to serve.
    public func run() async throws {
        guard let listen = configuration.listen else {
            try? await gracefulShutdown()
            return
        }
        guard let address = ListenAddress(listen) else {
            throw ConfigurationError(key: "realtime.listen", source: "configuration", reason: "'\(listen)' is not HOST:PORT")
        }
        try await RealtimeServer(address: address, endpoint: self, health: health, logger: logger).run()
    }

    /// Applies changed keys and token settings to later joins and token pushes.
    public func reload(_ configuration: RealtimeConfiguration) async {
        guard configuration.credentials != credentials.withLock({ $0 }) else { return }
        apply(credentials: configuration.credentials)
        logger.info("applied the realtime keys", metadata: ["keys": "\(configuration.credentials.keys.map(\.name).joined(separator: ","))"])
    }

    public var report: OutputReport {
        let top = consumers.withLock { $0.top(Self.consumersShown) }
        let metrics = top.flatMap { consumer, usage in
            [
                OutputReport.Metric(
                    "pgherald_realtime_consumer_connections", .gauge(Double(usage.connections)), labels: [("consumer", consumer.description)],
                    help: "Realtime connections of the keys and users holding the most (the top \(Self.consumersShown))."
                ),
                OutputReport.Metric(
                    "pgherald_realtime_consumer_channels", .gauge(Double(usage.channels)), labels: [("consumer", consumer.description)],
                    help: "Realtime channels of the keys and users holding the most (the top \(Self.consumersShown))."
                ),
                OutputReport.Metric(
                    "pgherald_realtime_consumer_conditions", .gauge(Double(usage.conditions)), labels: [("consumer", consumer.description)],
                    help: "What the filter conditions of the same keys' and users' channels cost together (realtime.max_conditions_per_key, _per_user)."
                ),
            ]
        }
        let held = OutputReport.Metric(
            "pgherald_realtime_held_bytes", .gauge(Double(heldBytes.heldBytes)),
            help: "Bytes the realtime sockets hold: frames waiting for their clients and the messages they are sending, unfinished."
        )
        let missed = broadcasts.missedFrames
        let missedMetric = OutputReport.Metric(
            "pgherald_realtime_missed_frames_total", .counter(Int64(missed)),
            help: "Broadcast and presence frames realtime channels missed: past their 1,024 frames or their socket's realtime.max_queued_bytes waiting."
        )
        return OutputReport(
            statistics: OutputStatistics(feed: .live, delivered: delivered.withLock { $0 }, missed: missed), metrics: metrics + [held, missedMetric]
        )
    }

    /// How many of the top consumers `/stats` and `/metrics` list.
    static let consumersShown = 10

    public func contribute(to statistics: inout DaemonStatistics) {
        let top = consumers.withLock { $0.top(Self.consumersShown) }
        guard !top.isEmpty else { return }
        statistics.consumers = top.map {
            .init(consumer: $0.consumer.description, connections: $0.usage.connections, channels: $0.usage.channels, conditions: $0.usage.conditions)
        }
    }
}
