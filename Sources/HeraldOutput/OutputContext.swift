public import Herald
public import HeraldPostgres
public import Logging

/// What the daemon hands every output it builds.
public struct OutputContext: Sendable {
    public var broker: Broker
    /// The journal's listener, for durable feeds (``journalFeed(named:)``); on an edge it does not run.
    public var listener: PostgresListener
    /// Where the events come from: the listener, or an edge's feed.
    public var source: any EventSource
    /// Key `database`: for an output's own queries (a ``JournalFeed``, the webhook tables).
    public var database: ConnectionString
    /// Key `name`: durable outputs keep their cursors under it.
    public var daemonName: String
    public var version: String
    public var catalog: SchemaCatalog
    public var journal: JournalReader
    public var maintenance: JournalMaintenance
    public var metrics: DaemonMetrics
    /// Section `access`; nil: whoever may connect sees everything.
    public var access: AccessPolicy?
    /// Where subscribers under `rls: true` get what their role and claims may see.
    public var rowSecurity: RowSecurityGate
    /// The outputs built before this one.
    public var outputs: OutputDirectory
    /// Under the output's log category.
    public var logger: Logger

    public init(
        broker: Broker, listener: PostgresListener, source: any EventSource, database: ConnectionString, daemonName: String, version: String,
        catalog: SchemaCatalog, journal: JournalReader, maintenance: JournalMaintenance, metrics: DaemonMetrics,
        access: AccessPolicy?, rowSecurity: RowSecurityGate, outputs: OutputDirectory, logger: Logger
    ) {
        self.broker = broker
        self.listener = listener
        self.source = source
        self.database = database
        self.daemonName = daemonName
        self.version = version
        self.catalog = catalog
        self.journal = journal
        self.maintenance = maintenance
        self.metrics = metrics
        self.access = access
        self.rowSecurity = rowSecurity
        self.outputs = outputs
        self.logger = logger
    }

    /// The durable feed of the output `name`, with its cursor under this daemon's name.
    public func journalFeed(named name: String) -> JournalFeed {
        JournalFeed(output: name, daemon: daemonName, connection: database, broker: broker, listener: listener)
    }
}
