/// What changed between two results of a live query, by key.
public struct LiveQueryDifference: Sendable, Hashable {
    /// Rows whose key was not in the older result.
    public var added: [RawJSON]
    /// Rows whose key was there with other values.
    public var changed: [RawJSON]
    /// Keys (JSON arrays of the key columns' values) no longer in the result.
    public var removed: [LiveQueryResult.RowKey]

    public init(added: [RawJSON] = [], changed: [RawJSON] = [], removed: [LiveQueryResult.RowKey] = []) {
        self.added = added
        self.changed = changed
        self.removed = removed
    }

    public var isEmpty: Bool { added.isEmpty && changed.isEmpty && removed.isEmpty }
}
