import Synchronization

/// Held by whatever groups events by transaction: while one is held, the
/// listener marks each transaction's last event (``Event/endsTransaction``),
/// which costs it one small journal query per batch it publishes. Released
/// when the holder drops it.
public final class TransactionEndsDemand: Sendable {
    private let broker: Broker

    init(broker: Broker) {
        self.broker = broker
        broker.transactionEndDemand.add(1, ordering: .relaxed)
    }

    deinit {
        broker.transactionEndDemand.subtract(1, ordering: .relaxed)
    }
}

extension Broker {
    /// Asks the listener to mark transaction ends for as long as the result is held.
    public func demandTransactionEnds() -> TransactionEndsDemand {
        TransactionEndsDemand(broker: self)
    }

    /// Whether anything groups events by transaction now, so that the
    /// publisher should mark transaction ends.
    public var marksTransactionEnds: Bool {
        transactionEndDemand.load(ordering: .relaxed) > 0
    }

    /// Every committed transaction whose rows `filter` passes, as one group
    /// holding those rows in order.
    ///
    /// Groups end exactly at commit boundaries in durable mode, where the
    /// listener learns from the journal which event ends a transaction. In
    /// notify-only mode nothing says where a transaction ends, so a group
    /// is delivered only once an event of a later transaction arrives.
    /// - Parameter capacity: events (not groups) the subscription may fall behind; defaults to the broker's.
    public func transactions(_ filter: EventFilter = .all, capacity: Int? = nil) -> TransactionSubscription {
        // Every event, so that the grouper sees each transaction's end, whichever table it is on.
        TransactionSubscription(
            subscription: subscribe(.all, capacity: capacity, kind: "in-process-transactions"),
            filter: filter,
            demand: demandTransactionEnds()
        )
    }
}
