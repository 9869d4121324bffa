public import Herald
public import HeraldOutput
public import HeraldPostgres
public import HeraldSettings

/// Live queries as the daemon serves them: section `queries`, the
/// ``LiveQueryEngine`` that keeps their results current, and
/// `GET /queries/NAME` on the socket, which finds it here.
public final class LiveQueryOutput: Output {
    public static let section = "queries"
    /// A query's SQL, key or parameters change what subscribers hold: a restart applies them.
    public static let reloadableKeys: [String] = []

    public let engine: LiveQueryEngine

    public static func configuration(from settings: SettingsReader) throws(ConfigurationError) -> LiveQueryConfiguration? {
        try LiveQueryConfiguration.read(from: settings)
    }

    public init(configuration: LiveQueryConfiguration, context: OutputContext) {
        engine = LiveQueryEngine(
            definitions: configuration.definitions, broker: context.broker, database: context.database, logger: context.logger
        )
    }

    public func run() async throws {
        try await engine.run()
    }

    public func reload(_ configuration: LiveQueryConfiguration) async {}

    public var report: OutputReport {
        let statistics = engine.statistics
        let failing = statistics.values.compactMap(\.lastError).first
        return OutputReport(
            statistics: OutputStatistics(
                health: failing == nil ? "ok" : "degraded", reason: failing, feed: .live,
                delivered: statistics.values.reduce(0) { $0 + $1.evaluations }
            ),
            metrics: statistics.sorted { $0.key < $1.key }.flatMap { name, figures in [
                OutputReport.Metric(
                    "pgherald_live_query_evaluations_total", .counter(Int64(figures.evaluations)), labels: [("query", name)],
                    help: "Times a live query ran, over all its parameter values."
                ),
                OutputReport.Metric(
                    "pgherald_live_query_subscribers", .gauge(Double(figures.subscribers)), labels: [("query", name)],
                    help: "Subscribers of a live query now."
                ),
            ] }
        )
    }

    public func contribute(to statistics: inout DaemonStatistics) {
        statistics.queries = engine.statistics
    }
}
