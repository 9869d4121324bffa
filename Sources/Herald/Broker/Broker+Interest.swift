extension Broker {
    /// Whether some subscriber may want events of `table`: one that names
    /// it, or one that names no table (possibly narrowed by schema or op).
    /// A subscriber that overflowed and reads on from the history counts
    /// until it is cancelled: what is published meanwhile must be there for it.
    public func hasSubscribers(following table: TableName) -> Bool {
        state.withLock { state in
            !state.subscribersForAllTables.isEmpty || state.subscribersByTable[table]?.isEmpty == false
                || state.catchingUp.values.contains { $0?.contains(table) ?? true }
        }
    }

    /// Whether any subscriber is registered, or reads on from the history after an overflow.
    public var hasSubscribers: Bool {
        state.withLock { state in !state.subscribersForAllTables.isEmpty || !state.subscribersByTable.isEmpty || !state.catchingUp.isEmpty }
    }
}
