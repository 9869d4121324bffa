/// A live stream of committed transactions, one ``TransactionGroup`` each
/// (see ``Broker/transactions(_:capacity:)``).
///
/// Iterate it once, from one task. Like ``Subscription``, it ends when the
/// broker shuts down (a transaction still in progress then is not
/// delivered) and throws ``SubscriptionOverflowError`` when the consumer
/// fell too far behind.
public final class TransactionSubscription: AsyncSequence, Sendable {
    public typealias Element = TransactionGroup
    public typealias Failure = SubscriptionOverflowError

    let subscription: Subscription
    public let filter: EventFilter
    private let demand: TransactionEndsDemand

    init(subscription: Subscription, filter: EventFilter, demand: TransactionEndsDemand) {
        self.subscription = subscription
        self.filter = filter
        self.demand = demand
    }

    /// Stops the stream; the consumer gets the groups already complete, then the end.
    public func cancel() {
        subscription.cancel()
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let stream: TransactionSubscription
        var grouper: TransactionGrouper
        var ready: ArraySlice<TransactionGroup> = []

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(SubscriptionOverflowError) -> TransactionGroup? {
            while ready.isEmpty {
                let events = try await stream.subscription.nextBatch(isolation: actor)
                if events.isEmpty { return nil }
                ready = grouper.add(events)[...]
            }
            return ready.popFirst()
        }

        public mutating func next() async throws(SubscriptionOverflowError) -> TransactionGroup? {
            try await next(isolation: nil)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(stream: self, grouper: TransactionGrouper(filter: filter))
    }
}
