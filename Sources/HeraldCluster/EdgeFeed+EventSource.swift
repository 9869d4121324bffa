public import HeraldOutput

extension EdgeFeed: EventSource {
    /// The stream's sequence as the change count; no journal here, so no
    /// durable feeds and no journal maintenance.
    public var offers: EventSourceOffers { [.changeCount] }
}
