/// What a live query's subscriber receives: the whole result, and what
/// changed since the subscriber's previous one.
public struct LiveQueryUpdate: Sendable, Hashable {
    /// The result as it now is.
    public var result: LiveQueryResult
    /// Nil on a first update, which the subscriber takes whole; otherwise what
    /// changed since its previous update (or since the result it resumed from).
    public var difference: LiveQueryDifference?
    /// The newest transaction id among the changes that made this result, if one is known.
    public var transactionID: UInt64?

    public init(result: LiveQueryResult, difference: LiveQueryDifference?, transactionID: UInt64? = nil) {
        self.result = result
        self.difference = difference
        self.transactionID = transactionID
    }
}
