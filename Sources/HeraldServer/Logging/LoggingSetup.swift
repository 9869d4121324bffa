#if canImport(Glibc)
import Glibc
#endif
import Logging

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

    /// Bootstraps swift-log; call once, before creating any logger.
    public static func bootstrap(_ configuration: Configuration, environment: [String: String]) {
        let journal = environment["JOURNAL_STREAM"].map { !$0.isEmpty } ?? false
        let colour = !journal && isatty(STDERR_FILENO) == 1 && environment["NO_COLOR"] == nil
        LoggingSystem.bootstrap { label in
            HeraldLogHandler(
                category: label,
                level: configuration.levels.level(for: label),
                format: configuration.format,
                journalPrefix: journal,
                colour: colour
            )
        }
    }
}
