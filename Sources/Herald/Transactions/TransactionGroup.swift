/// One committed transaction's events, in order, as one message: what
/// `GET /events?group=transaction`, ``Broker/transactions(_:capacity:)`` and
/// `HeraldClient.transactions(_:)` deliver.
///
/// ```json
/// {"txid":"7791","count":2,"events":[{"id":"1042",...},{"id":"1043",...}]}
/// ```
public struct TransactionGroup: Sendable, Hashable {
    /// PostgreSQL transaction id (`xid8`) of the transaction, as text.
    public let transactionID: String
    /// The transaction's events that the filter passed, in the order they
    /// were written; never empty.
    public let events: [Event]

    /// - Precondition: `events` is not empty and all are from `transactionID`.
    public init(transactionID: String, events: [Event]) {
        precondition(!events.isEmpty, "a transaction group holds at least one event")
        self.transactionID = transactionID
        self.events = events
    }

    /// How many events the group holds: the transaction's rows that the filter passed.
    public var count: Int { events.count }

    /// The id of the group's last event: where a stream resumes after this transaction.
    public var lastEventID: String { events[events.count - 1].id }
}
