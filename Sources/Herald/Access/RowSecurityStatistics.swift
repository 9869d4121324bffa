/// What row-level security has cost: `row_security` in `GET /stats`.
public struct RowSecurityStatistics: Codable, Sendable, Hashable {
    /// Cohorts now: distinct roles and claims with subscribers.
    public var cohorts = 0
    /// Batches judged since start.
    public var batches: UInt64 = 0
    /// Policy statements run since start: at most one per cohort and table per batch.
    public var checks: UInt64 = 0
    /// Time spent in the database judging batches, catalog reads included.
    public var checkSeconds: Double = 0
    /// Cohorts ended because a check failed (a policy raised an error, the role cannot be set).
    public var failures: UInt64 = 0
    /// Batches judged for one expensive cohort alone (large rows, or a slow
    /// policy), so that the other cohorts' events did not wait for them.
    public var aloneBatches: UInt64 = 0

    public init() {}
}
