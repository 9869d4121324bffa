public import Logging

/// A default log level with per-category overrides, written `info,database=debug`.
public struct LogLevels: Sendable, Hashable, CustomStringConvertible {
    public var defaultLevel: Logger.Level
    public var overrides: [LogCategory: Logger.Level]

    public init(defaultLevel: Logger.Level = .info, overrides: [LogCategory: Logger.Level] = [:]) {
        self.defaultLevel = defaultLevel
        self.overrides = overrides
    }

    /// Parses a comma-separated list of `LEVEL` and `CATEGORY=LEVEL` items.
    public init(parsing text: String) throws(LogLevelsError) {
        self.init()
        for item in text.split(separator: ",", omittingEmptySubsequences: false).map({ $0.trimmingPrefix(while: \.isWhitespace) }) {
            guard !item.isEmpty else { throw LogLevelsError(text: text, reason: "empty item") }
            if let equals = item.firstIndex(of: "=") {
                let name = item[..<equals]
                guard let category = LogCategory(rawValue: String(name)) else {
                    throw LogLevelsError(
                        text: text,
                        reason: "unknown category '\(name)' (known: \(LogCategory.allCases.map(\.rawValue).joined(separator: ", ")))"
                    )
                }
                overrides[category] = try Self.level(item[item.index(after: equals)...], in: text)
            } else {
                defaultLevel = try Self.level(item, in: text)
            }
        }
    }

    public func level(for category: String) -> Logger.Level {
        LogCategory(rawValue: category).flatMap { overrides[$0] } ?? defaultLevel
    }

    public var description: String {
        ([defaultLevel.rawValue] + overrides.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key.rawValue)=\($0.value.rawValue)" })
            .joined(separator: ",")
    }

    private static func level(_ name: Substring, in text: String) throws(LogLevelsError) -> Logger.Level {
        guard let level = Logger.Level(rawValue: name.lowercased()) else {
            throw LogLevelsError(
                text: text,
                reason: "unknown level '\(name)' (known: \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")))"
            )
        }
        return level
    }
}

/// A `--log-level` value that could not be parsed.
public struct LogLevelsError: Error, Hashable, CustomStringConvertible {
    public var text: String
    public var reason: String

    public var description: String { "invalid log levels '\(text)': \(reason)" }
}
