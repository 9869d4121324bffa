import Foundation

/// What one load-client run measured, as written to the results file.
struct LoadResult: Codable {
    var scenario: String
    var label: String
    var subscribers: Int
    var expectedPerSubscriber: Int
    var received: Int
    var deliveredRatio: Double
    var missing: Int
    var duplicatedOrReordered: Int
    /// Rows a row-level-security stream received of a team not its own; absent outside scenario s.
    var foreign: Int?
    var overflows: Int
    var resumes: Int
    var failedStreams: Int
    var firstFailure: String?
    var latencyMilliseconds: Latency?
    /// The latency CDF: (milliseconds, fraction of events at or below).
    var latencyCDF: [[Double]]
    var firstReceiptMicroseconds: Int64?
    var lastReceiptMicroseconds: Int64?
    var clientCPUSeconds: Double
    var clientWallSeconds: Double
    var clientThreads: Int
    /// Scenario o.: queries the apps ran themselves (the seed pattern); absent where the daemon ran them.
    var queriesRun: Int?

    struct Latency: Codable {
        var p50: Double
        var p99: Double
        var p999: Double
        var max: Double
        var mean: Double

        /// Percentiles of latencies in microseconds, sorted ascending.
        init?(sorted: [Int32]) {
            guard let last = sorted.last else { return nil }
            p50 = LoadResult.milliseconds(sorted, at: 0.5)
            p99 = LoadResult.milliseconds(sorted, at: 0.99)
            p999 = LoadResult.milliseconds(sorted, at: 0.999)
            max = Double(last) / 1000
            mean = sorted.reduce(0.0) { $0 + Double($1) } / Double(sorted.count) / 1000
        }
    }

    /// About `points` points of the CDF, denser in the tail where the interest is.
    static func cdf(sorted: [Int32], points: Int = 120) -> [[Double]] {
        guard !sorted.isEmpty else { return [] }
        var fractions = (0..<points).map { index -> Double in
            // Evenly spaced in -log10(1 - f): as many points between 0.99 and 0.999 as between 0 and 0.9.
            let exponent = 4 * Double(index) / Double(points - 1)
            return 1 - pow(10, -exponent)
        }
        fractions.append(1)
        return fractions.map { [milliseconds(sorted, at: $0), $0] }
    }

    /// The nearest-rank percentile of latencies in microseconds, sorted ascending, in milliseconds.
    static func milliseconds(_ sorted: [Int32], at fraction: Double) -> Double {
        let index = min(sorted.count - 1, max(0, Int((Double(sorted.count) * fraction).rounded(.up)) - 1))
        return Double(sorted[index]) / 1000
    }
}
