extension Broker {
    /// A consistent snapshot of the broker's counters.
    public struct Statistics: Sendable, Hashable {
        /// Events published since start.
        public var changeCount: UInt64
        /// Events published per table since start.
        public var tableCounts: [TableName: UInt64]
        /// Subscribers registered now, by the kind they subscribed with.
        public var subscribersByKind: [String: Int]
        /// Subscribers registered now.
        public var subscriberCount: Int { subscribersByKind.values.reduce(0, +) }
        /// Subscribers dropped because their mailbox overflowed.
        public var overflowCount: UInt64
    }

    public var statistics: Statistics {
        state.withLock { state in
            let subscribers = state.allSubscribers
            return Statistics(
                changeCount: state.changeCount,
                tableCounts: state.tableCounts,
                subscribersByKind: subscribers.reduce(into: [:]) { $0[$1.kind, default: 0] += 1 },
                overflowCount: state.overflowCount
            )
        }
    }
}
