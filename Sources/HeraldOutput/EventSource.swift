public import Herald
public import ServiceLifecycle

/// Where a daemon's events come from: a service that publishes them into
/// the broker, in commit order, for as long as it runs.
///
/// Two sources exist: `PostgresListener` reads this database's journal,
/// and an edge's `EdgeFeed` reads the JetStream stream the database
/// daemons fill. Outputs ask what a source offers (``offers``) rather
/// than which one it is, so that a third source, such as logical
/// replication, is one more conforming type.
public protocol EventSource: Service, Sendable {
    /// What outputs may rely on while this source feeds the broker.
    var offers: EventSourceOffers { get }
    /// The source's state, durability and progress, as health checks,
    /// statistics and the watchdog read them.
    var health: SourceHealth { get }
}
