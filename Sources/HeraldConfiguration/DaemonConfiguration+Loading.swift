import Foundation
import Herald
import HeraldAPI
import HeraldCluster
import HeraldEventLog
import HeraldHTTP
import HeraldNATSOutput
public import HeraldOutput
import HeraldPostgres
import HeraldService
public import HeraldSettings
import HeraldSupabase
import HeraldWebhooks
import Logging

extension DaemonConfiguration {
    /// The least a listener hands the broker at once, and so the least a buffer may hold.
    static let minimumBuffer = PostgresListener.maximumBatch

    /// Reads and checks every setting, the outputs' through `registry`. Nothing connects.
    /// - Throws: the first setting that cannot be used, naming its key and source.
    public static func load(
        from sources: ConfigurationSources, registry: OutputRegistry = .standard
    ) async throws(ConfigurationError) -> DaemonConfiguration {
        let settings = try await SettingsReader(sources: sources)
        var warnings: [String] = []
        // Every mistake is collected, so that one run of check-config (or serve) names them all.
        var mistakes: [ConfigurationError] = []
        func attempt<Value>(_ read: () throws(ConfigurationError) -> Value) -> Value? {
            do {
                return try read()
            } catch {
                mistakes.append(error)
                return nil
            }
        }

        let password = attempt { () throws(ConfigurationError) in try passwordFromFile(settings) } ?? nil
        let databaseText = settings.string("database", secret: true, recorded: false)
        let database = attempt { () throws(ConfigurationError) in
            try connectionString("database", flag: "--db", text: databaseText ?? "", password: password, settings, warnings: &warnings)
        }
        let databaseIsNamed = databaseText != nil || libpqVariablesNamingADatabase.contains { !(sources.environment[$0] ?? "").isEmpty }
        // The listener's own conninfo, for a database reached through a transaction pooler.
        var listenDatabase: ConnectionString?
        if let text = settings.string("listen_database", secret: true, recorded: false), !text.isEmpty {
            listenDatabase = attempt { () throws(ConfigurationError) in
                try connectionString("listen_database", flag: "--listen-db", text: text, password: password, settings, warnings: &warnings)
            }
        } else {
            settings.record("listen_database", "(none: the listener uses database)")
        }
        let name = settings.string("name", default: "default")
        if name.isEmpty { mistakes.append(settings.fail("name", "must not be empty")) }
        let durability = attempt { () throws(ConfigurationError) in try settings.choice("durability", default: Durability?.none) } ?? nil
        if durability == .notifyOnly {
            warnings.append(Durability.notifyOnlyCeiling)
        }
        if let source = settings.retired("channel") {
            warnings.append("channel (\(source)) is no longer a setting and is ignored: the install chooses a private channel, "
                + "which the daemon reads from the database; remove it")
        }
        func duration(_ key: String, _ fallback: HumanDuration, expected: String) -> HumanDuration {
            attempt { () throws(ConfigurationError) in try settings.value(key, default: fallback, expected: expected) } ?? fallback
        }
        let retention = duration("retention", "24h", expected: "a duration such as 24h, 90m or 7d")
        let pruneInterval = duration("prune_interval", "60s", expected: "a duration such as 60s")
        let history = attempt { () throws(ConfigurationError) in try settings.int("history", default: 100_000, in: 0...Int.max) } ?? 100_000
        let mailbox = attempt { () throws(ConfigurationError) in try settings.int("mailbox_capacity", default: 4096, in: minimumBuffer...Int.max) } ?? 4096
        let connectTimeout = duration("connect_timeout", "10s", expected: "a duration such as 10s")
        let probeInterval = duration("probe_interval", "30s", expected: "a duration such as 30s")
        let backstopInterval = duration("backstop_interval", "10s", expected: "a duration such as 10s")
        let stopGrace = duration("stop_grace", "5s", expected: "a duration such as 5s")
        if stopGrace.duration < .seconds(2) { mistakes.append(settings.fail("stop_grace", "must be at least 2s, to leave the final checkpoint time")) }
        let (levels, format) = attempt { () throws(ConfigurationError) in try logSettings(settings) } ?? (LogLevels(), nil)
        let metricsListen = settings.string("metrics.listen")
        if let metricsListen, ListenAddress(metricsListen) == nil {
            mistakes.append(settings.fail("metrics.listen", "'\(metricsListen)' is not HOST:PORT, such as 127.0.0.1:9187 or [::1]:9187"))
        }
        let access = attempt { () throws(ConfigurationError) in try accessPolicy(settings) } ?? nil
        var failedSections: [(section: String, error: ConfigurationError)] = []
        var outputs = registry.settings(from: settings, mistakes: &failedSections)
        mistakes += failedSections.map(\.error)
        if outputs[SocketServer.section] != nil, access == nil {
            warnings.append("no access section: whoever the socket's mode and group let in sees every table (see access: in systemd/pgherald.yaml)")
        }
        if let network = outputs[SocketServer.section]?.as(SocketConfiguration.self)?.network {
            warnings += network.warnings
        }
        if access != nil, let metricsListen {
            warnings.append("metrics.listen (\(metricsListen)) serves per-table counts to whoever reaches it; the access section covers the socket only")
        }
        if let cluster = outputs[ClusterLink.section]?.as(ClusterConfiguration.self),
           let subject = outputs[NATSOutput.section]?.as(NATSOutputConfiguration.self)?.subject,
           let taken = cluster.subjects.first(where: subject.captures) {
            mistakes.append(settings.fail("nats.subject", "its stream would take the cluster's own messages (\(taken)): begin it with a token other than pgherald-cluster"))
        }
        // The console key's holder is the operator: no realtime key may be the same secret under a narrower grant.
        if let consoleKey = outputs[SocketServer.section]?.as(SocketConfiguration.self)?.console?.key,
           let twin = outputs[RealtimeEndpoint.section]?.as(RealtimeConfiguration.self)?.credentials.keys.first(where: { $0.sharesSecret(with: consoleKey) }) {
            mistakes.append(settings.fail("realtime.keys.\(twin.name).key", "is the console's key (console.key), whose holder is the operator: give each its own key"))
        }
        let source = attempt { () throws(ConfigurationError) in try settings.choice("source", default: Source.database) } ?? .database
        if source == .nats { _ = attempt { () throws(ConfigurationError) in try checkEdge(&outputs, settings) } }
        // A section that stopped at a mistake did not read its later keys: they are not unknown.
        mistakes += settings.unknownKeys(allowingPrefixes: failedSections.map { "\($0.section)." })
        if let error = ConfigurationError(all: mistakes) { throw error }
        guard let database else { throw settings.fail("database", "cannot be read") }

        var configuration = DaemonConfiguration(
            database: database, databaseIsNamed: databaseIsNamed, listenDatabase: listenDatabase, name: name, durability: durability,
            retention: retention.duration, pruneInterval: pruneInterval.duration, history: history,
            mailboxCapacity: mailbox, connectTimeout: connectTimeout.duration, probeInterval: probeInterval.duration,
            backstopInterval: backstopInterval.duration, stopGrace: stopGrace.duration, logLevels: levels, logFormat: format,
            metricsListen: metricsListen, access: access, outputs: outputs, warnings: warnings, effective: settings.effective
        )
        configuration.source = source
        return configuration
    }

    /// An edge (`source: nats`) reads its events from `cluster.stream` and no journal:
    /// outputs that keep a journal cursor of their own belong on a database
    /// daemon, and the webhook service, always on elsewhere, is off.
    private static func checkEdge(_ outputs: inout [String: OutputKind.Settings], _ settings: SettingsReader) throws(ConfigurationError) {
        guard let cluster = outputs[ClusterLink.section]?.as(ClusterConfiguration.self) else {
            throw settings.fail("source", "source: nats makes an edge, which takes its events from the cluster's stream: add cluster.name, cluster.nats and cluster.stream")
        }
        guard cluster.stream != nil else {
            throw settings.fail("cluster.stream", "source: nats needs the JetStream stream the database daemons' nats output fills (their nats.stream)")
        }
        if outputs[WebhookService.section]?.as([WebhookEndpoint].self)?.isEmpty == true { outputs[WebhookService.section] = nil }
        for section in [WebhookService.section, NATSOutput.section] where outputs[section] != nil {
            throw settings.fail(section, "an edge (source: nats) reads no journal, and \(section) keeps a cursor in it: run it on a database daemon")
        }
        if let log = outputs[EventLogOutput.section]?.as(EventLogConfiguration.self), log.feed == .durable, log.feedIsSet {
            throw settings.fail("event_log.feed", "an edge (source: nats) reads no journal: use feed: live, or keep the durable log on a database daemon")
        }
    }

    /// libpq's variables that choose a server or a database: with one of them
    /// set, an empty `database` is a choice, not a file nobody has edited yet.
    static let libpqVariablesNamingADatabase = ["PGHOST", "PGHOSTADDR", "PGDATABASE", "PGSERVICE", "PGSERVICEFILE"]

    /// `key` (`database`, or `listen_database` for the listener's own) as a
    /// conninfo, recorded with its password masked. A password written into
    /// the conninfo itself is warned about; `password_file` serves both.
    private static func connectionString(
        _ key: String, flag: String, text: String, password: String?, _ settings: SettingsReader, warnings: inout [String]
    ) throws(ConfigurationError) -> ConnectionString {
        let connection: ConnectionString
        do {
            connection = try ConnectionString(text, password: password)
        } catch {
            throw settings.fail(key, error.message)
        }
        settings.record(key, "'\(connection)'" + (connection.containsPassword || password != nil ? " (password masked)" : ""))
        if connection.containsPassword {
            let source = settings.source(of: key) ?? "default"
            let exposure = source == flag ? "\(flag) contains a password, which every local user can read with ps" : "\(key) (\(source)) contains a password"
            warnings.append("\(exposure); put it in password_file (a systemd credential or a file only the daemon reads), ~/.pgpass or PGPASSFILE instead")
        }
        return connection
    }

    /// `password_file`: a path, or the name of a systemd credential (`LoadCredential=NAME:…`),
    /// read from `$CREDENTIALS_DIRECTORY`.
    private static func passwordFromFile(_ settings: SettingsReader) throws(ConfigurationError) -> String? {
        guard let reference = settings.string("password_file") else { return nil }
        let (path, lines) = try settings.secretFile(reference, key: "password_file")
        guard let password = lines.first else { throw settings.fail("password_file", "\(path) is empty") }
        return password
    }

    private static func logSettings(_ settings: SettingsReader) throws(ConfigurationError) -> (LogLevels, LogFormat?) {
        let levelText = settings.string("log.level", default: "info")
        var levels: LogLevels
        do {
            levels = try LogLevels(parsing: levelText)
        } catch {
            throw settings.fail("log.level", error.reason)
        }
        let inline = levels.overrides
        for category in LogCategory.allCases {
            let key = "log.categories.\(category.rawValue)"
            guard let name = settings.string(key, recorded: false) else { continue }
            settings.record(key, name)
            guard let level = Logger.Level(rawValue: name.lowercased()) else {
                throw settings.fail(key, "'\(name)' is not one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            // A category named in log.level (as --log-level info,database=debug does) wins.
            if inline[category] == nil { levels.overrides[category] = level }
        }
        let format = try settings.choice("log.format", default: LogFormat?.none)
        return (levels, format)
    }

    /// The configuration as `check-config --all` prints it: every setting.
    public var rendered: String { rendered(all: true) }

    /// The configuration as `check-config` prints it: one `key: value  # source` line per setting, within `columns`.
    ///
    /// A setting too long for the line has its source on a line of its own
    /// above it. Without `all`, the sections where every key has its default
    /// are named in one line instead of listed.
    public func rendered(columns: Int = 100, all: Bool) -> String {
        let sections = Dictionary(grouping: effective) { setting in
            setting.key.contains(".") ? String(setting.key.prefix { $0 != "." }) : ""
        }
        let summarised = all ? [] : sections.filter { $0.key != "" && $0.value.allSatisfy { $0.source == "default" } }.keys.sorted()
        let shown = effective.filter { setting in !summarised.contains { setting.key.hasPrefix($0 + ".") } }
        // The sources line up after the settings that fit, and never past the middle of the line.
        let fitting = shown.map { $0.key.count + 2 + $0.value.count }.filter { $0 + 4 <= columns / 2 }
        let sourceColumn = (fitting.max() ?? 0) + 3
        var lines: [String] = []
        for setting in shown {
            let line = "\(setting.key): \(setting.value)"
            if line.count + 2 + setting.source.count + 2 <= columns, line.count < sourceColumn {
                lines.append(line.padding(toLength: sourceColumn, withPad: " ", startingAt: 0) + "# \(setting.source)")
            } else if line.count + 3 + setting.source.count + 2 <= columns {
                lines.append("\(line)   # \(setting.source)")
            } else {
                lines.append("# \(setting.key) from \(setting.source):")
                lines.append(line)
            }
        }
        if !summarised.isEmpty {
            // Wrapped, each line a comment, so that the listing stays within `columns`.
            var line = "# all defaults (check-config --all lists them):"
            for (index, section) in summarised.enumerated() {
                let word = " " + section + (index < summarised.count - 1 ? "," : "")
                if line.count + word.count > columns {
                    lines.append(line)
                    line = "#  "
                }
                line += word
            }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }
}
