extension Broker {
    /// A consistent snapshot of the broker's counters.
    public struct Statistics: Sendable, Hashable {
        /// Events published since start.
        public var changeCount: UInt64
        /// Events published per table since start.
        public var tableCounts: [TableName: UInt64]
        /// Subscribers registered now.
        public var subscriberCount: Int
        /// Subscribers dropped because their mailbox overflowed.
        public var overflowCount: UInt64
    }

    public var statistics: Statistics {
        state.withLock { state in
            var ids = Set(state.subscribersForAllTables.keys)
            for subscribers in state.subscribersByTable.values { ids.formUnion(subscribers.keys) }
            return Statistics(
                changeCount: state.changeCount,
                tableCounts: state.tableCounts,
                subscriberCount: ids.count,
                overflowCount: state.overflowCount
            )
        }
    }
}
