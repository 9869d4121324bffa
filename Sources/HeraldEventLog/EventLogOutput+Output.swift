import Foundation
public import Herald
public import HeraldOutput
public import HeraldSettings

extension EventLogOutput: Output {
    /// Section `event_log`; off without `event_log.path`.
    public static let section = "event_log"
    /// The path is reopened on every reload (logrotate moves the file and sends SIGHUP).
    public static let reloadableKeys = ["event_log.path", "event_log.sync", "event_log.sync_interval", "event_log.max_size", "event_log.keep"]

    public static func configuration(from settings: SettingsReader) throws(ConfigurationError) -> EventLogConfiguration? {
        let path = settings.string("event_log.path")
        let sync = try settings.choice("event_log.sync", default: EventLogConfiguration.Sync.interval)
        let interval = try settings.value("event_log.sync_interval", default: "1s" as HumanDuration, expected: "a duration such as 1s or 500ms")
        let maximumSize = try settings.value("event_log.max_size", default: ByteSize?.none, expected: "a size such as 100M, 1G or a number of bytes")
        let keep = try settings.int("event_log.keep", default: 5, in: 1...1000)
        let feed = try settings.choice("event_log.feed", default: OutputStatistics.Feed.durable)
        guard let path else { return nil }
        let directory = (path as NSString).deletingLastPathComponent
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.isEmpty ? "." : directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw settings.fail("event_log.path", "directory \(directory) does not exist")
        }
        if let maximumSize, maximumSize.bytes < 4096 {
            throw settings.fail("event_log.max_size", "\(maximumSize) is too small to hold an event; use at least 4K")
        }
        return EventLogConfiguration(path: path, sync: sync, syncInterval: interval.duration, maximumSize: maximumSize?.bytes, keep: keep, feed: feed,
            feedIsSet: settings.source(of: "event_log.feed") != nil
        )
    }

    public convenience init(configuration: EventLogConfiguration, context: OutputContext) throws {
        try self.init(
            configuration: configuration, broker: context.broker, health: context.source.health, sourceOffers: context.source.offers,
            journal: context.journalFeed(named: Self.section), logger: context.logger
        )
    }

    /// Reopens the file, with the new settings, on every reload.
    /// Ready once the log knows its feed: a durable log's cursor starts at the moment it is placed.
    public func waitUntilReady() async -> Bool {
        await started.wait()
    }

    public var isReady: Bool { started.answer == true }

    public func reload(_ configuration: EventLogConfiguration) async {
        await reopen(with: configuration)
    }

    public var report: OutputReport {
        let log = statistics
        return OutputReport(
            statistics: OutputStatistics(
                health: log.problem == nil ? "ok" : "degraded", reason: log.problem, feed: log.feed ?? .live,
                delivered: UInt64(log.written), lastEventID: journal.lastEventID.map(String.init),
                backlog: log.feed == .durable ? journal.backlog : nil
            ),
            metrics: [
                .init("pgherald_event_log_written_total", .counter(log.written), help: "Events appended to the event log."),
                .init("pgherald_event_log_failed_writes_total", .counter(log.failedWrites), help: "Batches the event log could not write (a full disk)."),
                .init("pgherald_event_log_overflows_total", .counter(log.overflows), help: "Times the event log fell behind and lost events."),
                .init("pgherald_event_log_rotations_total", .counter(log.rotations), help: "Size rotations of the event log."),
            ]
        )
    }
}
