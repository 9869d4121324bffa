public import Herald
public import HeraldSettings
public import ServiceLifecycle

/// Somewhere events go: stdout, the event log, webhooks, the socket's
/// streams, Supabase clients.
///
/// One type per kind of output, which
/// - reads its own section of the configuration in ``configuration(from:)``,
///   with documented defaults (nil means the output is off);
/// - is built from that and the daemon's ``OutputContext``, and runs as a
///   `Service` in `serve`'s group, stopping gracefully with it;
/// - is fed live, by a broker subscription that drops it when it falls
///   behind, or durably, by a ``JournalFeed`` with a cursor of its own;
/// - says how it is doing in ``report``, which `/stats` and `/metrics` show;
/// - applies a section read again on SIGHUP in ``reload(_:)``;
/// - says in ``waitUntilReady()`` when what commits from then on reaches it.
///
/// `serve` builds its outputs from ``OutputRegistry``: a new kind is a folder
/// with its type and one line in the registry. ARCHITECTURE.md walks through
/// the smallest one.
public protocol Output: Service, Sendable {
    /// The settings of this kind, as ``configuration(from:)`` reads them.
    associatedtype Configuration: Sendable & Equatable

    /// The configuration section it reads, which also names it in `/stats` and
    /// `/metrics`: `stdout`, `event_log`, `webhooks`.
    static var section: String { get }

    /// Keys under ``section`` whose change ``reload(_:)`` applies while
    /// running (`webhooks.` for every key under it); a change to any other
    /// key is logged as needing a restart.
    static var reloadableKeys: [String] { get }

    /// Reads the section, recording every key for `check-config`; nil when
    /// the output is off.
    /// - Throws: the first key whose value cannot be used.
    static func configuration(from settings: SettingsReader) throws(ConfigurationError) -> Configuration?

    /// Prepares the output; nothing is fed before `run()`.
    init(configuration: Configuration, context: OutputContext) throws

    /// Applies a reloaded configuration. Called only with a configuration
    /// that ``configuration(from:)`` returned and that differs from the last.
    func reload(_ configuration: Configuration) async

    /// Health and figures now.
    var report: OutputReport { get }

    /// Adds to `/stats` what this kind reports beyond ``report``.
    func contribute(to statistics: inout DaemonStatistics)

    /// Waits until every event committed from now on reaches this output: a
    /// feed that starts "from now" has taken its place, a socket accepts.
    /// False if the output ended first. systemd's `READY=1` and `/healthz`
    /// wait for every output's answer, so a client that writes once the
    /// daemon is ready loses nothing to a start still under way.
    /// Default: ready at once.
    func waitUntilReady() async -> Bool

    /// Whether ``waitUntilReady()`` has answered true.
    var isReady: Bool { get }
}

extension Output {
    /// Adds to `/stats` what this kind reports beyond ``report`` (webhooks
    /// keep their per-endpoint figures under `webhooks`). Default: nothing.
    public func contribute(to statistics: inout DaemonStatistics) {}

    /// Ready at once: outputs that take no place of their own in the journal,
    /// or that subscribe to the broker when they are built.
    public func waitUntilReady() async -> Bool { true }

    public var isReady: Bool { true }
}
