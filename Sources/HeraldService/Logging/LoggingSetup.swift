#if canImport(Glibc)
import Glibc
#endif
import Logging
import Synchronization

/// Installs ``HeraldLogHandler`` as the process-wide logging backend.
public enum LoggingSetup {
    /// Log settings.
    public struct Configuration: Sendable {
        public var levels: LogLevels
        /// Default: `pretty` on a terminal, `logfmt` otherwise (including under systemd).
        public var format: LogFormat

        public init(levels: LogLevels = .init(), format: LogFormat? = nil) {
            self.levels = levels
            self.format = format ?? (isatty(STDERR_FILENO) == 1 ? .pretty : .logfmt)
        }
    }

    /// The levels and format every logger follows.
    static let live = LiveLogSettings(Configuration())

    /// Bootstraps swift-log; call once, before creating any logger.
    public static func bootstrap(_ configuration: Configuration, environment: [String: String]) {
        let journal = environment["JOURNAL_STREAM"].map { !$0.isEmpty } ?? false
        let colour = !journal && isatty(STDERR_FILENO) == 1 && environment["NO_COLOR"] == nil
        live.current = configuration
        LoggingSystem.bootstrap { label in
            HeraldLogHandler(category: label, live: live, journalPrefix: journal, colour: colour)
        }
    }

    /// Applies new levels and format to every logger, existing ones included (a reload).
    public static func reconfigure(_ configuration: Configuration) {
        live.current = configuration
    }
}

/// Log settings shared by every handler, so that a reload changes loggers already made.
final class LiveLogSettings: Sendable {
    private let settings: Mutex<LoggingSetup.Configuration>

    init(_ configuration: LoggingSetup.Configuration) {
        settings = Mutex(configuration)
    }

    var current: LoggingSetup.Configuration {
        get { settings.withLock { $0 } }
        set { settings.withLock { $0 = newValue } }
    }
}
