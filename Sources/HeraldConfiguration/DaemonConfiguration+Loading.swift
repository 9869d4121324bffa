import Foundation
import HeraldPostgres
import HeraldServer
import Logging

extension DaemonConfiguration {
    /// The least a listener hands the broker at once, and so the least a buffer may hold.
    static let minimumBuffer = PostgresListener.maximumBatch

    /// Reads and checks every setting. Nothing connects.
    /// - Throws: the first setting that cannot be used, naming its key and source.
    public static func load(from sources: ConfigurationSources) async throws(ConfigurationError) -> DaemonConfiguration {
        let settings = try await SettingsReader(sources: sources)
        var warnings: [String] = []

        let password = try passwordFromFile(settings)
        let database = try connectionString(
            "database", flag: "--db", text: settings.string("database", default: "", secret: true, recorded: false)!,
            password: password, settings, warnings: &warnings
        )
        // The listener's own conninfo, for a database reached through a transaction pooler.
        var listenDatabase: ConnectionString?
        if let text = settings.string("listen_database", secret: true, recorded: false), !text.isEmpty {
            listenDatabase = try connectionString("listen_database", flag: "--listen-db", text: text, password: password, settings, warnings: &warnings)
        } else {
            settings.record("listen_database", "(none: the listener uses database)")
        }
        let name = settings.string("name", default: "default")!
        guard !name.isEmpty else { throw settings.fail("name", "must not be empty") }
        let durability = try settings.choice("durability", default: Durability?.none)
        if durability == .notifyOnly {
            warnings.append(Durability.notifyOnlyCeiling)
        }
        if let source = settings.retired("channel") {
            warnings.append("channel (\(source)) is no longer a setting and is ignored: the install chooses a private channel, "
                + "which the daemon reads from the database; remove it")
        }
        let retention = try settings.value("retention", default: HumanDuration(configString: "24h"), expected: "a duration such as 24h, 90m or 7d")!
        let pruneInterval = try settings.value("prune_interval", default: HumanDuration(configString: "60s"), expected: "a duration such as 60s")!
        let history = try settings.int("history", default: 100_000, in: 0...Int.max)
        let mailbox = try settings.int("mailbox_capacity", default: 4096, in: minimumBuffer...Int.max)
        let connectTimeout = try settings.value("connect_timeout", default: HumanDuration(configString: "10s"), expected: "a duration such as 10s")!
        let probeInterval = try settings.value("probe_interval", default: HumanDuration(configString: "30s"), expected: "a duration such as 30s")!
        let backstopInterval = try settings.value("backstop_interval", default: HumanDuration(configString: "10s"), expected: "a duration such as 10s")!
        let stdout = try settings.choice("stdout", default: StdoutChoice.none)!

        let socket = try socketConfiguration(settings)
        let (levels, format) = try logSettings(settings)
        let eventLog = try eventLogConfiguration(settings)
        let metricsListen = settings.string("metrics.listen")
        if let metricsListen, ListenAddress(metricsListen) == nil {
            throw settings.fail("metrics.listen", "'\(metricsListen)' is not HOST:PORT, such as 127.0.0.1:9187 or [::1]:9187")
        }
        let webhooks = try webhookEndpoints(settings)
        let access = try accessPolicy(settings)
        let realtime = try realtimeConfiguration(settings)
        if socket != nil, access == nil {
            warnings.append("no access section: whoever the socket's mode and group let in sees every table (see access: in systemd/pgherald.yaml)")
        }
        if access != nil, let metricsListen {
            warnings.append("metrics.listen (\(metricsListen)) serves per-table counts to whoever reaches it; the access section covers the socket only")
        }
        try settings.rejectUnknownKeys()

        return DaemonConfiguration(
            database: database, listenDatabase: listenDatabase, name: name, durability: durability,
            retention: retention.duration, pruneInterval: pruneInterval.duration, history: history,
            mailboxCapacity: mailbox, connectTimeout: connectTimeout.duration, probeInterval: probeInterval.duration,
            backstopInterval: backstopInterval.duration,
            stdout: stdout == .none ? nil : StdoutFormat(rawValue: stdout.rawValue),
            socket: socket, logLevels: levels, logFormat: format, eventLog: eventLog,
            metricsListen: metricsListen, webhooks: webhooks, access: access, realtime: realtime, warnings: warnings, effective: settings.effective
        )
    }

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
        let (path, lines) = try secretFile(reference, key: "password_file", settings)
        guard let password = lines.first else { throw settings.fail("password_file", "\(path) is empty") }
        return password
    }

    /// The non-empty lines of a file holding secrets: `reference` is a path,
    /// or a bare name for a systemd credential in `$CREDENTIALS_DIRECTORY`.
    static func secretFile(_ reference: String, key: String, _ settings: SettingsReader) throws(ConfigurationError) -> (path: String, lines: [String]) {
        let path: String
        if reference.contains("/") {
            path = reference
        } else {
            guard let directory = settings.sources.environment["CREDENTIALS_DIRECTORY"] else {
                throw settings.fail(key, "'\(reference)' names a systemd credential, but CREDENTIALS_DIRECTORY is not set (use LoadCredential=\(reference):FILE in the unit, or give a path)")
            }
            path = "\(directory)/\(reference)"
        }
        let contents: String
        do {
            contents = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw settings.fail(key, "cannot read \(path): \((error as NSError).localizedDescription)")
        }
        let lines = contents.split(whereSeparator: \.isNewline).map(String.init)
        return (path, lines)
    }

    private static func socketConfiguration(_ settings: SettingsReader) throws(ConfigurationError) -> SocketConfiguration? {
        let enabled = try settings.bool("socket.enabled", default: true)
        let path = settings.string("socket.path", default: SocketConfiguration.defaultPath(environment: settings.sources.environment))!
        let modeText = settings.string("socket.mode", default: "660")!
        guard let mode = mode_t(modeText, radix: 8), mode <= 0o777 else {
            throw settings.fail("socket.mode", "'\(modeText)' is not octal permissions such as 660")
        }
        guard mode & 0o600 == 0o600 else { throw settings.fail("socket.mode", "must let the owner read and write (at least 600)") }
        let group = settings.string("socket.group")
        if let group, getgrnam(group) == nil { throw settings.fail("socket.group", "no group named '\(group)'") }
        let maximum = try settings.int("socket.max_subscribers", default: 10_000, in: 1...Int.max)
        let connections = try settings.int("socket.max_connections", default: maximum + 128, in: 1...Int.max)
        let idleTimeout = try settings.value("socket.idle_timeout", default: HumanDuration(configString: "10s"), expected: "a duration such as 10s")!
        let buffer = try settings.int("socket.subscriber_buffer", default: 4096, in: minimumBuffer...Int.max)
        let heartbeat = try settings.value("socket.heartbeat_interval", default: HumanDuration(configString: "15s"), expected: "a duration such as 15s")!
        let writeRate = try settings.int("socket.write_rate", default: 50_000, in: 0...Int.max)
        guard enabled else { return nil }
        return SocketConfiguration(
            path: path, mode: mode, group: group, maximumSubscribers: maximum, maximumConnections: connections,
            idleTimeout: idleTimeout.duration, subscriberBuffer: buffer,
            heartbeatInterval: heartbeat.duration, writeRate: writeRate == 0 ? nil : writeRate
        )
    }

    private static func logSettings(_ settings: SettingsReader) throws(ConfigurationError) -> (LogLevels, LogFormat?) {
        let levelText = settings.string("log.level", default: "info")!
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

    private static func eventLogConfiguration(_ settings: SettingsReader) throws(ConfigurationError) -> EventLogConfiguration? {
        let path = settings.string("event_log.path")
        let sync = try settings.choice("event_log.sync", default: EventLogConfiguration.Sync.interval)!
        let interval = try settings.value("event_log.sync_interval", default: HumanDuration(configString: "1s"), expected: "a duration such as 1s or 500ms")!
        let maximumSize = try settings.value("event_log.max_size", default: ByteSize?.none, expected: "a size such as 100M, 1G or a number of bytes")
        let keep = try settings.int("event_log.keep", default: 5, in: 1...1000)
        guard let path else { return nil }
        let directory = (path as NSString).deletingLastPathComponent
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.isEmpty ? "." : directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw settings.fail("event_log.path", "directory \(directory) does not exist")
        }
        if let maximumSize, maximumSize.bytes < 4096 {
            throw settings.fail("event_log.max_size", "\(maximumSize) is too small to hold an event; use at least 4K")
        }
        return EventLogConfiguration(
            path: path, sync: sync, syncInterval: interval.duration,
            maximumSize: maximumSize?.bytes, keep: keep
        )
    }

    /// The configuration as `check-config` prints it: one `key: value  # source` line per setting.
    public var rendered: String {
        let width = effective.map { $0.key.count + $0.value.count }.max() ?? 0
        return effective.map { setting in
            let line = "\(setting.key): \(setting.value)"
            return line.padding(toLength: width + 3, withPad: " ", startingAt: 0) + "# \(setting.source)"
        }.joined(separator: "\n")
    }
}
