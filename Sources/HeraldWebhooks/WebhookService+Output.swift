public import Herald
public import HeraldOutput
public import HeraldSettings

extension WebhookService: Output {
    /// Section `webhooks`: one endpoint per name. Always built, so that a
    /// reload can add the first endpoint; idle without any.
    public static let section = "webhooks"
    public static let reloadableKeys = ["webhooks."]

    public static func configuration(from settings: SettingsReader) throws(ConfigurationError) -> [WebhookEndpoint]? {
        try WebhookEndpoint.all(from: settings)
    }

    public convenience init(configuration: [WebhookEndpoint], context: OutputContext) {
        self.init(
            endpoints: configuration, store: WebhookStore(connection: context.database, daemon: context.daemonName),
            broker: context.broker, health: context.source.health, catalog: context.catalog, version: context.version, logger: context.logger
        )
    }

    /// Ready once each endpoint's feed has its place: a new endpoint's feed starts at the moment it is recorded.
    public func waitUntilReady() async -> Bool {
        await started.wait()
    }

    public var isReady: Bool { started.answer == true }

    /// Applies a changed endpoint list; pending deliveries stay in the database throughout.
    public func reload(_ configuration: [WebhookEndpoint]) async {
        guard configuration != endpoints else { return }
        do {
            try await reload(endpoints: configuration)
            logger.info("applied the webhook endpoints", metadata: ["endpoints": "\(configuration.map(\.name).joined(separator: ","))"])
        } catch let problem as FilterProblem {
            logger.error("the reloaded webhook endpoints are refused; the ones before stay in force", metadata: ["error": "\(problem)"])
        } catch let conflict as WebhookStore.DefinitionConflict {
            logger.error("the reloaded webhook endpoints are refused; the ones before stay in force", metadata: ["error": "\(conflict)"])
        } catch {
            logger.error("cannot apply the webhook endpoints; the database is unavailable", metadata: ["error": "\(error)"])
        }
    }

    public var report: OutputReport {
        let all = statistics
        var metrics: [OutputReport.Metric] = []
        for (name, figures) in all.sorted(by: { $0.key < $1.key }) {
            let labels = [("endpoint", name)]
            metrics += [
                .init("pgherald_webhook_attempts_total", .counter(Int64(figures.attempts)), labels: labels, help: "Webhook requests sent by this daemon."),
                .init("pgherald_webhook_successes_total", .counter(Int64(figures.successes)), labels: labels, help: "Webhook requests answered 2xx."),
                .init("pgherald_webhook_failures_total", .counter(Int64(figures.failures)), labels: labels, help: "Webhook requests that failed (retried or given up)."),
                .init("pgherald_webhook_retries_total", .counter(Int64(figures.retries)), labels: labels, help: "Failed webhook requests that will be tried again."),
                .init("pgherald_webhook_dead_letters_total", .counter(Int64(figures.deadLettered)), labels: labels,
                      help: "Webhook deliveries given up and moved to the dead letters."),
                .init("pgherald_webhook_in_flight", .gauge(Double(figures.inFlight)), labels: labels, help: "Webhook requests in flight now."),
                .init("pgherald_webhook_backlog", .gauge(Double(figures.backlog ?? 0)), labels: labels,
                      help: "Webhook deliveries pending in the database (rows, ids in flight, the journal past the feed), for every daemon."),
                .init("pgherald_webhook_oldest_pending_seconds", .gauge(figures.oldestPendingSeconds ?? 0), labels: labels,
                      help: "Age of the oldest pending webhook delivery."),
            ]
        }
        let failing = all.filter { $0.value.failing }.keys.sorted()
        return OutputReport(
            statistics: OutputStatistics(
                health: failing.isEmpty ? "ok" : "degraded",
                reason: failing.isEmpty ? nil : "failing: \(failing.joined(separator: ", "))",
                feed: health.durability == .notifyOnly ? .live : .durable,
                delivered: all.values.reduce(0) { $0 + $1.successes },
                backlog: all.values.contains { $0.backlog != nil } ? all.values.reduce(0) { $0 + ($1.backlog ?? 0) } : nil
            ),
            metrics: metrics
        )
    }

    /// `webhooks` in `/stats`: per endpoint, when there is one.
    public func contribute(to statistics: inout DaemonStatistics) {
        guard !endpoints.isEmpty else { return }
        statistics.webhooks = self.statistics
    }
}
