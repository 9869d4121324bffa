#if canImport(Glibc)
import Glibc
#endif
public import Herald
public import HeraldPostgres
public import Prometheus
import Foundation
import Synchronization

/// The daemon's Prometheus metrics, served as text at `GET /metrics`.
///
/// Counts the daemon keeps anyway (events by table, subscribers, journal
/// size, …) are copied into the registry when scraped, so `/metrics` and
/// `/stats` always agree; delivery lag and refused requests are recorded as
/// they happen, through swift-metrics with this registry's factory.
public final class DaemonMetrics: Sendable {
    /// Delivery-lag buckets, in seconds: from a millisecond to a minute.
    static let lagBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
        .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10), .seconds(60),
    ]
    /// Subscriber kinds always reported, so that a kind that drops to zero shows 0 rather than vanishing.
    static let subscriberKinds = ["sse", "ndjson", "stdout", "eventlog", "in-process", "realtime"]

    public let registry: PrometheusCollectorRegistry
    let broker: Broker
    /// The source's state; ``listener``'s own counters stay 0 where it does not run (an edge).
    let health: SourceHealth
    let listener: PostgresListener
    let maintenance: JournalMaintenance?
    let outputs: OutputDirectory
    /// Totals already added to each counter, by counter name and labels.
    private let reported = Mutex<[String: Int64]>([:])
    /// The same for counters of seconds.
    private let reportedSeconds = Mutex<[String: Double]>([:])
    let rowSecurity: RowSecurityGate?
    /// Every subscriber kind reported so far: one whose last subscriber left
    /// goes on showing 0, where its gauge kept its last value.
    private let kindsSeen = Mutex<Set<String>>(Set(subscriberKinds))
    /// The gauges the outputs reported at the last scrape, by name and labels.
    private let outputGauges = Mutex<[String: Gauge]>([:])

    /// - Parameter registry: the one swift-metrics was bootstrapped with (``factory(for:)``).
    /// - Parameter outputs: filled as `serve` builds them; each adds its report's series.
    public init(
        registry: PrometheusCollectorRegistry, broker: Broker, health: SourceHealth, listener: PostgresListener,
        maintenance: JournalMaintenance?, outputs: OutputDirectory, rowSecurity: RowSecurityGate? = nil
    ) {
        self.rowSecurity = rowSecurity
        self.outputs = outputs
        self.registry = registry
        self.broker = broker
        self.health = health
        self.listener = listener
        self.maintenance = maintenance
    }

    /// The factory to bootstrap swift-metrics with, before anything makes a metric, so what is recorded through it lands in `registry`.
    public static func factory(for registry: PrometheusCollectorRegistry) -> PrometheusMetricsFactory {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets["pgherald_delivery_lag_seconds"] = lagBuckets
        factory.durationHistogramBuckets["pgherald_webhook_latency_seconds"] = lagBuckets
        return factory
    }

    /// A refused `GET /events`: 400 (bad filter) or 503 (too many streams, catalog unavailable).
    public func recordRefusal(status: Int) {
        registry.makeCounter(
            descriptor: MetricNameDescriptor(metricName: "pgherald_socket_refusals_total", unitName: "", helpText: "Event streams refused, by HTTP status."),
            labels: [("status", String(status))]
        ).increment()
    }

    /// The text format, with every collected value brought up to date.
    public func render(journal: DaemonStatistics.Journal?) -> [UInt8] {
        collect(journal: journal)
        return registry.emitToBuffer()
    }

    private func collect(journal: DaemonStatistics.Journal?) {
        let statistics = broker.statistics
        for (key, count) in statistics.operationCounts {
            advance("pgherald_events_total", to: Int64(count), labels: [
                ("schema", key.table.schema), ("table", key.table.name), ("op", key.operation.rawValue),
            ], help: "Events delivered, by schema, table and operation.")
        }
        gauge("pgherald_change_count", Double(statistics.changeCount), help: "The change counter: events since the daemon started.")
        // As /stats counts them: the daemon's broker, and the row-security cohorts' (a stream under rls: true).
        let subscribers = statistics.subscribersByKind.merging(rowSecurity?.subscribersByKind ?? [:], uniquingKeysWith: +)
        let kinds = kindsSeen.withLock { seen in
            seen.formUnion(subscribers.keys)
            return seen
        }
        for kind in kinds {
            gauge("pgherald_subscribers", Double(subscribers[kind] ?? 0), labels: [("kind", kind)], help: "Subscribers now, by kind.")
        }
        advance("pgherald_overflows_total", to: Int64(statistics.overflowCount + (rowSecurity?.overflowCount ?? 0)), help: "Subscribers whose mailbox overflowed: dropped, or a socket stream that read on from the history.")

        let state = health.status.name
        for candidate in SourceHealth.Status.names {
            gauge("pgherald_listener_state", candidate == state ? 1 : 0, labels: [("state", candidate)], help: "1 for the listener's state now.")
        }
        advance("pgherald_listener_reconnects_total", to: listener.reconnects, help: "Connections to PostgreSQL re-established after a loss.")
        advance("pgherald_catch_up_events_total", to: listener.catchUpEvents, help: "Events delivered from the journal after gaps.")
        advance("pgherald_listener_probe_failures_total", to: listener.probeFailures,
                help: "Probe notifications the listener sent itself that did not come back in time; each made it reconnect.")
        gauge("pgherald_listener_parked", listener.isParked ? 1 : 0,
              help: "1 while the durable listener is parked, waiting for the doorbell; 0 while it reads the journal and writers skip NOTIFY.")
        advance("pgherald_journal_backstop_events_total", to: listener.backstopEvents,
                help: "Events that only the parked listener's backstop sweep found: their notification never came. Should stay 0.")
        if let feed = health.position {
            gauge("pgherald_edge_stream_sequence", Double(feed.position ?? 0), help: "An edge's last stream sequence read (source: nats).")
            gauge("pgherald_edge_stream_lag", Double(feed.lag ?? 0), help: "Messages the stream holds past an edge's last read; 0 when it keeps up.")
        }
        if let journal {
            gauge("pgherald_journal_rows", Double(journal.rows), help: "Rows in pgherald.journal (exact up to 100,000, estimated beyond).")
            gauge("pgherald_journal_bytes", Double(journal.bytes), help: "Size of pgherald.journal with its indexes and TOAST.")
            advance("pgherald_journal_pruned_total", to: journal.pruned, help: "Journal events emptied with their part by retention.")
        }
        var reportedGauges: [String: Gauge] = [:]
        for output in outputs.all {
            for metric in output.report.metrics {
                switch metric.value {
                case .counter(let total): advance(metric.name, to: total, labels: metric.labels, help: metric.help)
                case .gauge(let value):
                    let key = ([metric.name] + metric.labels.map { "\($0.0)=\($0.1)" }).joined(separator: ",")
                    reportedGauges[key] = gauge(metric.name, value, labels: metric.labels, help: metric.help)
                }
            }
        }
        // A series an output no longer reports (a consumer that left the top) goes, rather than keep its last value.
        let previous = outputGauges.withLock { gauges -> [String: Gauge] in
            let before = gauges
            gauges = reportedGauges
            return before
        }
        for (key, stale) in previous where reportedGauges[key] == nil {
            registry.unregisterGauge(stale)
        }
        collectRowSecurity()
        collectProcess()
    }

    /// RSS, open files and CPU time, from /proc.
    private func collectProcess() {
        if let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
           let pages = statm.split(separator: " ").dropFirst().first.flatMap({ Double($0) }) {
            gauge("process_resident_memory_bytes", pages * Double(sysconf(Int32(_SC_PAGESIZE))), help: "Resident memory size in bytes.")
        }
        if let descriptors = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            gauge("process_open_fds", Double(descriptors.count), help: "Open file descriptors.")
        }
        var usage = rusage()
        if getrusage(RUSAGE_SELF.rawValue, &usage) == 0 {
            let seconds = Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
            advance("process_cpu_seconds_total", toSeconds: seconds, help: "User and system CPU time spent, in seconds.")
        }
    }

    /// Cohorts, batches, statements and their time: what row-level security costs.
    private func collectRowSecurity() {
        guard let statistics = rowSecurity?.currentStatistics else { return }
        gauge("pgherald_rls_cohorts", Double(statistics.cohorts), help: "Row-level-security cohorts now: distinct roles and claims with subscribers.")
        advance("pgherald_rls_batches_total", to: Int64(statistics.batches), help: "Batches of events judged by row-level security.")
        advance("pgherald_rls_checks_total", to: Int64(statistics.checks), help: "Policy statements run: at most one per cohort and table per batch.")
        advance("pgherald_rls_check_seconds_total", toSeconds: statistics.checkSeconds, help: "Time spent in the database judging batches, catalog reads included.")
        advance("pgherald_rls_failures_total", to: Int64(statistics.failures), help: "Cohorts ended because a check failed (a policy raised an error, the role cannot be set).")
        advance("pgherald_rls_alone_batches_total", to: Int64(statistics.aloneBatches), help: "Batches judged for one expensive cohort alone (large rows, a slow policy), apart from the others.")
    }

    private func advance(_ name: String, toSeconds total: Double, help: String) {
        let counter = registry.makeCounter(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: [])
        reportedSeconds.withLock { reported in
            let before = reported[name, default: 0]
            if total > before { counter.increment(by: total - before) }
            reported[name] = max(before, total)
        }
    }

    private func advance(_ name: String, to total: Int64, labels: [(String, String)] = [], help: String) {
        let key = ([name] + labels.map { "\($0.0)=\($0.1)" }).joined(separator: ",")
        let counter = registry.makeCounter(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
        reported.withLock { reported in
            let before = reported[key, default: 0]
            if total > before { counter.increment(by: total - before) }
            reported[key] = max(before, total)
        }
    }

    @discardableResult
    private func gauge(_ name: String, _ value: Double, labels: [(String, String)] = [], help: String) -> Gauge {
        let gauge = registry.makeGauge(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
        gauge.set(value)
        return gauge
    }
}
