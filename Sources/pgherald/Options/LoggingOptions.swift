public import ArgumentParser
import Foundation
public import HeraldServer

struct LoggingOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Log level, with per-category overrides.",
            discussion: "Levels: trace, debug, info, notice, warning, error, critical. Categories: \(LogCategory.allCases.map(\.rawValue).joined(separator: ", ")). Example: info,database=debug.",
            valueName: "levels"
        )
    )
    var logLevel = "info"

    @Option(help: "Log format: json, logfmt or pretty. Default: pretty on a terminal, logfmt otherwise.")
    var logFormat: LogFormat?

    func validate() throws {
        _ = try levels()
    }

    /// Installs the log handler; call before any logger is made.
    func bootstrap() throws {
        LoggingSetup.bootstrap(.init(levels: try levels(), format: logFormat), environment: ProcessInfo.processInfo.environment)
    }

    private func levels() throws -> LogLevels {
        do {
            return try LogLevels(parsing: logLevel)
        } catch {
            throw ValidationError(error.description)
        }
    }
}

extension LogFormat: ExpressibleByArgument {}
