import Foundation
import HeraldAPI
import HeraldConfiguration
import HeraldConsole
import HeraldEventLog
import HeraldHTTP
import HeraldSettings
import HeraldSupabase
import Testing

@Suite struct ConfigurationTests {
    let directory: URL = {
        let url = FileManager.default.temporaryDirectory.appending(path: "pgherald-config-\(UUID().uuidString.prefix(8))")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }()

    func file(_ text: String, named name: String = "pgherald.yaml") throws -> String {
        let path = directory.appending(path: name).path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func load(
        _ text: String, environment: [String: String] = [:], flags: [String: ConfigurationSources.Flag] = [:]
    ) async throws -> DaemonConfiguration {
        try await DaemonConfiguration.load(from: ConfigurationSources(file: file(text), fileRequired: true, environment: environment, flags: flags))
    }

    func rejection(
        _ text: String, environment: [String: String] = [:], flags: [String: ConfigurationSources.Flag] = [:]
    ) async throws -> ConfigurationError {
        do {
            _ = try await DaemonConfiguration.load(from: ConfigurationSources(file: file(text), fileRequired: true, environment: environment, flags: flags))
        } catch let error as ConfigurationError {
            return error
        }
        Issue.record("accepted")
        return ConfigurationError(key: "", source: "", reason: "")
    }

    /// check-config fits a 100-column terminal: a setting too long moves its source to a line of its own,
    /// and sections left at their defaults are named in one line unless --all asks for them.
    @Test func theListingFitsAHundredColumnsAndSummarisesSectionsLeftAtTheirDefaults() async throws {
        let sql = "SELECT c.id AS course_id, c.name, count(e.student_id) AS enrolled FROM course c LEFT JOIN enrols_in e ON e.course_id = c.id GROUP BY c.id"
        let configuration = try await load("name: narrow\nqueries:\n  enrolments:\n    sql: \(sql)\n    key: [course_id]\n")
        let lines = configuration.rendered(all: false).split(separator: "\n").map(String.init)
        for line in lines where !line.hasPrefix("queries.enrolments.sql:") {
            #expect(line.count <= 100, "\(line.count) columns: \(line)")
        }
        let query = try #require(lines.firstIndex { $0.hasPrefix("queries.enrolments.sql:") })
        #expect(lines[query - 1].hasPrefix("# queries.enrolments.sql from ") && !lines[query].contains("  # "), "\(lines[query - 1])")
        #expect(lines.contains { $0.hasPrefix("name: narrow") && $0.hasSuffix("line 1") })
        #expect(!lines.contains { $0.hasPrefix("nats.") })
        let start = try #require(lines.firstIndex { $0.hasPrefix("# all defaults (check-config --all lists them):") })
        let summary = lines[start...].joined(separator: "\n")
        #expect(lines[start...].allSatisfy { $0.hasPrefix("#") } && summary.contains("nats"), "\(summary)")
        #expect(configuration.rendered(all: true).contains("\nnats."))
    }

    @Test func defaultsApplyWithAnEmptyFile() async throws {
        let configuration = try await load("")
        #expect(configuration.name == "default")
        #expect(configuration.retention == .seconds(86_400))
        #expect(configuration[SocketServer.self]?.maximumSubscribers == 10_000)
        #expect(configuration[SocketServer.self]?.writeRate == nil, "no ceiling: streams are paced by how busy their loop is")
        #expect(configuration[EventLogOutput.self] == nil)
        #expect(configuration.effective.allSatisfy { $0.source == "default" })
    }

    @Test func aDatabaseIsNamedByTheKeyAnyOfItsSourcesOrALibpqVariableButNotByNothing() async throws {
        #expect(try await load("").databaseIsNamed == false)
        #expect(try await load("name: x\n", environment: ["PGHOST": ""]).databaseIsNamed == false)
        #expect(try await load("database: \"\"\n").databaseIsNamed)
        #expect(try await load("database: dbname=app\n").databaseIsNamed)
        #expect(try await load("", environment: ["PGHERALD_DATABASE": "dbname=app"]).databaseIsNamed)
        #expect(try await load("", flags: ["database": .init(name: "--db", value: "dbname=app")]).databaseIsNamed)
        for variable in ["PGHOST", "PGDATABASE", "PGSERVICE"] {
            #expect(try await load("", environment: [variable: "x"]).databaseIsNamed, "\(variable)")
        }
    }

    @Test func theFileIsOverriddenByTheEnvironmentAndTheEnvironmentByFlags() async throws {
        let yaml = """
            name: from-file
            retention: 1h
            socket:
              max_subscribers: 10
              write_rate: 100
            """
        let environment = ["PGHERALD_SOCKET_MAX_SUBSCRIBERS": "20", "PGHERALD_RETENTION": "2h"]
        let configuration = try await load(yaml, environment: environment, flags: ["retention": .init(name: "--retention", value: "3h")])
        #expect(configuration.name == "from-file")
        #expect(configuration[SocketServer.self]?.maximumSubscribers == 20)
        #expect(configuration[SocketServer.self]?.writeRate == 100)
        #expect(configuration.retention == .seconds(3 * 3600))
        let sources = Dictionary(uniqueKeysWithValues: configuration.effective.map { ($0.key, $0.source) })
        #expect(sources["name"]?.hasSuffix("pgherald.yaml line 1") == true)
        #expect(sources["socket.max_subscribers"] == "PGHERALD_SOCKET_MAX_SUBSCRIBERS")
        #expect(sources["retention"] == "--retention")
        #expect(sources["history"] == "default")
    }

    @Test func theListenerTakesItsOwnConninfoAndAProbeInterval() async throws {
        let unset = try await load("")
        #expect(unset.listenDatabase == nil)
        #expect(unset.probeInterval == .seconds(30))
        #expect(unset.backstopInterval == .seconds(10))
        #expect(unset.stopGrace == .seconds(5))
        let configuration = try await load("""
            database: "host=pool.internal port=6432 dbname=app"
            listen_database: "host=/run/postgresql dbname=app"
            probe_interval: 5s
            backstop_interval: 30s
            stop_grace: 20s
            """)
        #expect(configuration.backstopInterval == .seconds(30))
        #expect(configuration.stopGrace == .seconds(20))
        #expect(configuration.listenDatabase?.description.hasPrefix("host=/run/postgresql ") == true)
        #expect(configuration.database.description.hasPrefix("host=pool.internal port=6432 dbname=app"))
        #expect(configuration.probeInterval == .seconds(5))
        let error = try await rejection("probe_interval: 0s\n")
        #expect(error.key == "probe_interval")
        #expect(error.reason.contains("not a duration"))
        let backstop = try await rejection("backstop_interval: never\n")
        #expect(backstop.key == "backstop_interval")
        let grace = try await rejection("stop_grace: 1s\n")
        #expect(grace.key == "stop_grace" && grace.reason.contains("at least 2s"))
        let exposed = try await load("listen_database: \"host=db password=secret\"\n")
        #expect(exposed.warnings.contains { $0.hasPrefix("listen_database (") && $0.contains("contains a password") })
    }

    @Test func notifyOnlyIsWarnedAboutForItsCommitCeiling() async throws {
        let notifyOnly = try await load("durability: notify-only\n")
        #expect(notifyOnly.warnings.contains { $0.hasPrefix("notify-only: every write notifies") })
        let durable = try await load("durability: durable\n")
        #expect(!durable.warnings.contains { $0.hasPrefix("notify-only") })
    }

    @Test func theRetiredChannelSettingIsIgnoredWithAWarning() async throws {
        let configuration = try await load("channel: pgherald\n")
        #expect(configuration.warnings.contains { $0.hasPrefix("channel (") && $0.contains("ignored") })
        #expect(!configuration.effective.contains { $0.key == "channel" })
        let unset = try await load("")
        #expect(!unset.warnings.contains { $0.hasPrefix("channel") })
    }

    @Test func everyRejectionNamesTheKeyTheSourceAndWhy() async throws {
        var error = try await rejection("socket:\n  max_subscribers: lots\n")
        #expect(error.key == "socket.max_subscribers")
        #expect(error.source.hasSuffix("pgherald.yaml line 2"))
        #expect(error.reason == "'lots' is not a whole number")

        error = try await rejection("", environment: ["PGHERALD_SOCKET_MAX_SUBSCRIBERS": "0"])
        #expect(error.source == "PGHERALD_SOCKET_MAX_SUBSCRIBERS")
        #expect(error.reason.contains("out of range"))

        error = try await rejection("", flags: ["retention": .init(name: "--retention", value: "forever")])
        #expect(error.source == "--retention")
        #expect(error.reason.contains("not a duration"))

        error = try await rejection("socket:\n  path: /tmp/x.sock\n  pahtt: /tmp/y.sock\n")
        #expect(error.key == "socket.pahtt")
        #expect(error.source.hasSuffix("line 3"))
        #expect(error.reason.contains("not a pgherald setting"))
        #expect(error.reason.contains("did you mean socket.path?"), "\(error.reason)")

        // A section given a value says so, and what goes beneath it.
        error = try await rejection("socket: /tmp/x.sock\n")
        #expect(error.key == "socket")
        #expect(error.reason.contains("is a section, not a value") && error.reason.contains("socket.path"), "\(error.reason)")

        // A key close to none gets no guess.
        error = try await rejection("colour_scheme: dark\n")
        #expect(error.reason.contains("not a pgherald setting") && !error.reason.contains("did you mean"), "\(error.reason)")
        error = try await rejection("retenion: 1h\n")
        #expect(error.reason.contains("did you mean retention?"), "\(error.reason)")

        error = try await rejection("durability: sometimes\n")
        #expect(error.reason == "'sometimes' is not one of durable, notify-only")

        error = try await rejection("socket:\n  mode: '400'\n")
        #expect(error.key == "socket.mode")

        error = try await rejection("log:\n  categories:\n    database: loud\n")
        #expect(error.key == "log.categories.database")

        error = try await rejection("log:\n  categories:\n    nosuch: debug\n")
        #expect(error.key == "log.categories.nosuch")

        error = try await rejection("database: 'host=x nonsense'\n")
        #expect(error.key == "database")

        error = try await rejection("password_file: /nonexistent/secret\n")
        #expect(error.key == "password_file")
        #expect(error.reason.contains("cannot read /nonexistent/secret: no such file; create it, or correct the path"), "\(error.reason)")
        #expect(!error.reason.contains("could not be completed"))

        let secretDirectory = FileManager.default.temporaryDirectory.appending(path: "pgherald-secret-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: secretDirectory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: secretDirectory) }
        error = try await rejection("password_file: \(secretDirectory)\n")
        #expect(error.reason.contains("cannot read \(secretDirectory): "), "\(error.reason)")
        #expect(!error.reason.contains("could not be completed"), "\(error.reason)")

        error = try await rejection("password_file: db-password\n")
        #expect(error.reason.contains("CREDENTIALS_DIRECTORY is not set"))

        error = try await rejection("event_log:\n  path: /nonexistent/dir/events.jsonl\n")
        #expect(error.key == "event_log.path")

        error = try await rejection("a: [\n")
        #expect(error.reason.hasPrefix("not valid YAML: line 2, column 1: did not find expected node content"), "\(error.reason)")

        error = try await rejection("realtime:\n listen: a\n  keys: 1\n")
        #expect(error.reason.hasPrefix("not valid YAML: line 3, column 7: mapping values are not allowed in this context; indent"), "\(error.reason)")
        #expect(!error.reason.hasSuffix(":"))

        error = try await rejection("x:\n\ty: 1\n")
        #expect(error.reason.hasSuffix("YAML indents with spaces, never tabs"), "\(error.reason)")

        let missing = ConfigurationSources(file: directory.appending(path: "missing.yaml").path, fileRequired: true, environment: [:])
        await #expect(throws: ConfigurationError.self) { try await DaemonConfiguration.load(from: missing) }
        let optional = ConfigurationSources(file: directory.appending(path: "missing.yaml").path, fileRequired: false, environment: [:])
        _ = try await DaemonConfiguration.load(from: optional)
    }

    @Test func secretsAreReadFromFilesAndCredentialsAndNeverShown() async throws {
        let secret = try file("s3cret-from-file\n", named: "password")
        var configuration = try await load("database: 'host=db.internal dbname=app'\npassword_file: \(secret)\n")
        #expect(!configuration.rendered.contains("s3cret-from-file"))
        #expect(configuration.rendered.contains("(password masked)"))

        let credentials = directory.appending(path: "credentials")
        try FileManager.default.createDirectory(at: credentials, withIntermediateDirectories: true)
        try "from-credential".write(to: credentials.appending(path: "db-password"), atomically: true, encoding: .utf8)
        configuration = try await load("password_file: db-password\n", environment: ["CREDENTIALS_DIRECTORY": credentials.path])
        #expect(!configuration.rendered.contains("from-credential"))

        configuration = try await load("database: 'host=db password=in-the-file'\n")
        #expect(!configuration.rendered.contains("in-the-file"))
        #expect(configuration.warnings.contains { $0.contains("contains a password") })
    }

    @Test func logLevelsCombineTheLevelAndItsCategories() async throws {
        let configuration = try await load("log:\n  level: warning\n  format: json\n  categories:\n    database: debug\n")
        #expect(configuration.logLevels.level(for: "database") == .debug)
        #expect(configuration.logLevels.level(for: "socket") == .warning)
        #expect(configuration.logFormat == .json)
        // A category named in the level (as --log-level gives it) wins over the file's section.
        let flagged = try await load("log:\n  categories:\n    database: debug\n", flags: ["log.level": .init(name: "--log-level", value: "info,database=error")])
        #expect(flagged.logLevels.level(for: "database") == .error)
    }

    @Test func eventLogAndMetricsSettings() async throws {
        let path = directory.appending(path: "events.jsonl").path
        let configuration = try await load("event_log:\n  path: \(path)\n  sync: every\n  max_size: 1M\n  keep: 3\nmetrics:\n  listen: 127.0.0.1:9187\n")
        #expect(configuration[EventLogOutput.self] == EventLogConfiguration(path: path, sync: .every, maximumSize: 1 << 20, keep: 3))
        #expect(configuration.metricsListen == "127.0.0.1:9187")
        let error = try await rejection("metrics:\n  listen: nowhere\n")
        #expect(error.key == "metrics.listen")
    }

    /// One reading names every mistake: a core setting, one in a section, a misspelt key, and one in a second
    /// section, whose later keys (not read past its mistake) are not called unknown.
    @Test func everyMistakeOfAFileIsReportedAtOnce() async throws {
        let error = try await rejection("""
            retention: forever
            socket:
              max_subscribers: -1
            nats:
              stream: PGHERALD
              brodcasts: true
            realtime:
              resume_window: soon
              max_channels: 5

            """)
        let all = [error] + error.further
        #expect(all.map(\.key) == ["retention", "realtime.resume_window", "socket.max_subscribers", "nats.brodcasts"], "\(error)")
        #expect(all.last?.reason.contains("did you mean nats.broadcasts?") == true)
        #expect(error.description.split(separator: "\n").count == 4, "one line each: \(error)")
    }

    @Test func theConsoleIsOffWithoutItsSectionAndOnTCPOnlyWithAKey() async throws {
        #expect(try await load("")[SocketServer.self]?.console == nil)
        #expect(try await load("console: {}\n")[SocketServer.self]?.console == ConsoleConfiguration())
        #expect(try await load("console:\n  enabled: false\n  listen: 127.0.0.1:8080\n  key: 0123456789abcdef\n")[SocketServer.self]?.console == nil)
        let keyed = try await load("console:\n  listen: '[::1]:8080'\n  key: 0123456789abcdef\n")[SocketServer.self]?.console
        #expect(keyed?.listen == ListenAddress("[::1]:8080"))
        #expect(keyed?.key?.name == "console")
        var error = try await rejection("console:\n  listen: 127.0.0.1:8080\n")
        #expect(error.key == "console.listen" && error.reason.contains("asks for a key"))
        error = try await rejection("console:\n  listen: 127.0.0.1:8080\n  key: short\n")
        #expect(error.key == "console.key" && error.reason.contains("at least 16"))
        error = try await rejection("console:\n  listen: eighty\n  key: 0123456789abcdef\n")
        #expect(error.key == "console.listen")
        error = try await rejection("socket:\n  enabled: false\nconsole: {}\n")
        #expect(error.key == "console" && error.reason.contains("socket.enabled"))
        // A realtime key opens a console on TCP too.
        let viewer = try await load("console:\n  listen: 127.0.0.1:8080\nrealtime:\n  keys:\n    web:\n      key: 0123456789abcdef\n")
        #expect(viewer[SocketServer.self]?.console?.listen != nil)
        // 0s turns the resume window off, as systemd/pgherald.yaml says; anything else must be a duration.
        #expect(try await load("realtime:\n  resume_window: 0s\n")[RealtimeEndpoint.self]?.resumeWindow == .zero)
        #expect(try await load("realtime:\n  resume_window: 90s\n")[RealtimeEndpoint.self]?.resumeWindow == .seconds(90))
        error = try await rejection("realtime:\n  resume_window: soon\n")
        #expect(error.key == "realtime.resume_window" && error.reason.contains("0s to turn it off"), "\(error)")
        // A realtime key may not take the name the operator's key goes by.
        error = try await rejection("realtime:\n  keys:\n    console:\n      key: 0123456789abcdef\n      tables: [public.items]\n")
        #expect(error.key == "realtime.keys.console" && error.reason.contains("another name"), "\(error)")
        error = try await rejection("realtime:\n  keys:\n    Console:\n      key: 0123456789abcdef\n")
        #expect(error.key == "realtime.keys.Console", "\(error)")
        // Nor be the console's key under a narrower grant: its holder would be the operator.
        error = try await rejection("console:\n  listen: 127.0.0.1:8080\n  key: 0123456789abcdef\nrealtime:\n  keys:\n    web:\n      key: 0123456789abcdef\n      tables: [public.items]\n")
        #expect(error.key == "realtime.keys.web.key" && error.reason.contains("console's key"), "\(error)")
    }

    @Test func theShippedExampleIsValidAndNamesEveryKey() async throws {
        let shipped = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appending(path: "systemd/pgherald.yaml").path
        // The access rule names the client group that the package's sysusers.d entry creates.
        let example = try file(String(contentsOfFile: shipped, encoding: .utf8).replacing("group: pgherald-clients", with: "group: root"), named: "shipped.yaml")
        let configuration = try await DaemonConfiguration.load(from: ConfigurationSources(
            file: example, fileRequired: true,
            // What the unit provides: the client group and the logs directory.
            environment: ["PGHERALD_SOCKET_GROUP": "root", "PGHERALD_EVENT_LOG_PATH": directory.appending(path: "events.jsonl").path]
        ))
        #expect(configuration.access?.rules.map(\.name) == ["clients"])
        // Shipped unconfigured, so an installed service does not start until someone names the database.
        #expect(!configuration.databaseIsNamed)
        let text = try String(contentsOfFile: example, encoding: .utf8)
        for setting in configuration.effective {
            let leaf = setting.key.split(separator: ".").last!
            #expect(text.contains("\(leaf):"), "systemd/pgherald.yaml does not mention \(setting.key)")
        }
    }
}
