public import HeraldPostgres

extension PostgresListener: EventSource {
    /// The journal, and durable feeds from it; the broker counts the changes.
    public var offers: EventSourceOffers { [.journal, .durableFeeds] }
}
