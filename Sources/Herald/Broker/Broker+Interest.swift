extension Broker {
    /// Whether some subscriber may want events of `table`: one that names
    /// it, or one that names no table (possibly narrowed by schema or op).
    public func hasSubscribers(following table: TableName) -> Bool {
        state.withLock { state in
            !state.subscribersForAllTables.isEmpty || state.subscribersByTable[table]?.isEmpty == false
        }
    }

    /// Whether any subscriber is registered.
    public var hasSubscribers: Bool {
        state.withLock { state in !state.subscribersForAllTables.isEmpty || !state.subscribersByTable.isEmpty }
    }
}
