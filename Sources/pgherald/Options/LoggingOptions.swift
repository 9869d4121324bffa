public import ArgumentParser
import Foundation
public import HeraldService

struct LoggingOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Log level, with per-category overrides. Default: info. Key: log.level (and log.categories).",
            discussion: "Levels: trace, debug, info, notice, warning, error, critical. Categories: \(LogCategory.allCases.map(\.rawValue).joined(separator: ", ")). Example: info,database=debug.",
            valueName: "levels"
        )
    )
    var logLevel: String?

    @Option(help: "Log format: json, logfmt or pretty. Default: pretty on a terminal, logfmt otherwise. Key: log.format.")
    var logFormat: LogFormat?
}

extension LogFormat: ExpressibleByArgument {}
