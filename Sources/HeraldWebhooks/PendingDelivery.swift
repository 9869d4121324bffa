/// An event on its way to one endpoint, for one attempt.
public struct PendingDelivery: Sendable, Hashable {
    /// Where the delivery is kept until it is settled.
    public enum Source: Sendable, Hashable {
        /// A row of `pgherald.webhook_delivery`, leased for this attempt; `seq` is feeding order.
        case queued(seq: Int64)
        /// Handed to this daemon straight from the journal: only its event id
        /// is written, in this daemon's `pgherald.webhook_in_flight` row.
        case handedOver
    }

    public var source: Source
    /// The event id: the `webhook-id` of every attempt, for receivers to deduplicate.
    public var eventID: String
    /// The event JSON, sent as it is.
    public var body: [UInt8]
    /// Attempts made, this one included.
    public var attempts: Int
    /// Time since the event was queued for the endpoint; for one handed over
    /// from the journal, since its write, so time spent waiting there counts.
    public var age: Duration

    public init(source: Source, eventID: String, body: [UInt8], attempts: Int, age: Duration) {
        self.source = source
        self.eventID = eventID
        self.body = body
        self.attempts = attempts
        self.age = age
    }
}

/// The outcome of one attempt, as it is written back.
public struct CompletedDelivery: Sendable, Hashable {
    public var delivery: PendingDelivery
    public var decision: DeliveryDecision
    public var status: Int?
    public var error: String?
    /// The start of the response body, for dead letters.
    public var responseExcerpt: String?

    public init(delivery: PendingDelivery, decision: DeliveryDecision, status: Int? = nil, error: String? = nil, responseExcerpt: String? = nil) {
        self.delivery = delivery
        self.decision = decision
        self.status = status
        self.error = error
        self.responseExcerpt = responseExcerpt
    }

    /// A handed-over delivery that was never sent (its endpoint began failing,
    /// or the daemon is stopping) goes to the table as due now.
    static func unsent(_ delivery: PendingDelivery) -> CompletedDelivery {
        var delivery = delivery
        delivery.attempts -= 1
        return CompletedDelivery(delivery: delivery, decision: .retry(after: .zero))
    }
}
