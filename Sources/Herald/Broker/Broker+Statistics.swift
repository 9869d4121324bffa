extension Broker {
    /// A consistent snapshot of the broker's counters.
    public struct Statistics: Sendable, Hashable {
        /// Events published since start.
        public var changeCount: UInt64
        /// Events published per table and operation since start.
        public var operationCounts: [TableOperation: UInt64]
        /// Events published per table since start.
        public var tableCounts: [TableName: UInt64] {
            operationCounts.reduce(into: [:]) { $0[$1.key.table, default: 0] += $1.value }
        }
        /// Subscribers registered now, by the kind they subscribed with.
        public var subscribersByKind: [String: Int]
        /// Subscribers registered now.
        public var subscriberCount: Int { subscribersByKind.values.reduce(0, +) }
        /// Subscribers whose mailbox overflowed: dropped, or, for a socket
        /// stream, read on from the history at its own pace.
        public var overflowCount: UInt64
    }

    public var statistics: Statistics {
        state.withLock { state in
            let subscribers = state.allSubscribers
            return Statistics(
                changeCount: state.changeCount,
                operationCounts: state.operationCounts,
                subscribersByKind: subscribers.reduce(into: [:]) { $0[$1.kind, default: 0] += 1 },
                overflowCount: state.overflowCount
            )
        }
    }
}

/// A table and an operation on it, the key of the broker's event counts.
public struct TableOperation: Sendable, Hashable {
    public var table: TableName
    public var operation: Operation

    public init(table: TableName, operation: Operation) {
        self.table = table
        self.operation = operation
    }
}
