/// Figures of one live query, in `/stats` under `queries`.
public struct LiveQueryStatistics: Sendable, Hashable, Codable {
    /// Times it ran, over every set of parameter values.
    public var evaluations: UInt64 = 0
    public var subscribers: Int = 0
    /// Distinct sets of parameter values now served.
    public var parameterSets: Int = 0
    /// The newest result's version among them.
    public var version: UInt64 = 0
    /// Why it last failed, if it did.
    public var lastError: String?

    public init() {}
}
