/// A delivery leased from `pgherald.webhook_delivery` for one attempt.
public struct PendingDelivery: Sendable, Hashable {
    /// The row, in feeding order.
    public var seq: Int64
    /// The event id: the `webhook-id` of every attempt, for receivers to deduplicate.
    public var eventID: String
    /// The event JSON, sent as it is.
    public var body: [UInt8]
    /// Attempts made, this one included.
    public var attempts: Int
    /// Time since the event was queued for the endpoint.
    public var age: Duration
}

/// The outcome of one attempt, as it is written back.
public struct CompletedDelivery: Sendable, Hashable {
    public var seq: Int64
    public var decision: DeliveryDecision
    public var status: Int?
    public var error: String?
    /// The start of the response body, for dead letters.
    public var responseExcerpt: String?
}
