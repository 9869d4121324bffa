public import Herald

/// How an output is doing now: its part of `/stats` and its series in `/metrics`.
public struct OutputReport: Sendable {
    /// A series in `/metrics`.
    public struct Metric: Sendable {
        public enum Value: Sendable {
            /// A total since start; `/metrics` adds what is new since the last scrape.
            case counter(Int64)
            case gauge(Double)
        }

        /// `pgherald_` and the output's own name, such as `pgherald_event_log_written_total`.
        public var name: String
        public var labels: [(String, String)]
        public var help: String
        public var value: Value

        public init(_ name: String, _ value: Value, labels: [(String, String)] = [], help: String) {
            self.name = name
            self.labels = labels
            self.help = help
            self.value = value
        }
    }

    public var statistics: OutputStatistics
    public var metrics: [Metric]

    public init(statistics: OutputStatistics, metrics: [Metric] = []) {
        self.statistics = statistics
        self.metrics = metrics
    }
}
