public import Configuration
import Foundation
import SystemPackage

/// Reads settings through swift-configuration, noting for each key where its
/// value came from and what it finally is, for errors and `check-config`.
///
/// Each output reads its own section with one (see `Output.configuration(from:)`):
/// every read records the key, so that `check-config` prints it with its
/// source and ``rejectUnknownKeys(allowingPrefixes:)`` refuses what no one read.
/// Used from one task while the configuration loads, so it is not `Sendable`.
public final class SettingsReader {
    public let sources: ConfigurationSources
    private let reader: ConfigReader
    private let file: ConfigurationFile?
    public private(set) var effective: [EffectiveSetting] = []
    private(set) var readKeys: Set<String> = []

    public init(sources: ConfigurationSources) async throws(ConfigurationError) {
        self.sources = sources
        var providers: [any ConfigProvider] = []
        // Flags are text like environment variables, and are converted the same way.
        let flags = Dictionary(uniqueKeysWithValues: sources.flags.map { (ConfigurationSources.environmentName(of: $0.key), $0.value.value) })
        providers.append(EnvironmentVariablesProvider(environmentVariables: flags).prefixKeys(with: "pgherald"))
        providers.append(EnvironmentVariablesProvider(environmentVariables: sources.environment).prefixKeys(with: "pgherald"))
        var file: ConfigurationFile?
        if let path = sources.file {
            let text: String
            if access(path, F_OK) != 0 {
                guard !sources.fileRequired else { throw ConfigurationError(key: "(file)", source: path, reason: "no such file") }
                text = ""
            } else if let handle = FileHandle(forReadingAtPath: path), let contents = try? handle.readToEnd() ?? Data() {
                text = String(decoding: contents, as: UTF8.self)
            } else {
                throw ConfigurationError(key: "(file)", source: path, reason: "cannot be read: \(String(cString: strerror(errno)))")
            }
            let parsed = try ConfigurationFile(path: path, text: text)
            if !parsed.lines.isEmpty {
                do {
                    providers.append(try await FileProvider<YAMLSnapshot>(filePath: FilePath(path)))
                } catch {
                    throw ConfigurationError(key: "(file)", source: path, reason: "cannot be read: \(error)")
                }
                file = parsed
            }
        }
        self.file = file
        reader = ConfigReader(providers: providers)
    }

    /// Where a key's value comes from, highest precedence first; nil when it is not set anywhere.
    public func source(of key: String) -> String? {
        if let flag = sources.flags[key] { return flag.name }
        let variable = ConfigurationSources.environmentName(of: key)
        if sources.environment[variable] != nil { return variable }
        return file?.source(of: key)
    }

    /// Fails on the keys of the file that no setting read, all of them in one error.
    public func rejectUnknownKeys(allowingPrefixes prefixes: [String] = []) throws(ConfigurationError) {
        if let error = ConfigurationError(all: unknownKeys(allowingPrefixes: prefixes)) { throw error }
    }

    /// The keys of the file that no setting read, in the file's order, each with a suggestion where one is close.
    public func unknownKeys(allowingPrefixes prefixes: [String] = []) -> [ConfigurationError] {
        guard let file else { return [] }
        return file.lines.sorted(by: { $0.value < $1.value }).compactMap { key, line in
            guard !readKeys.contains(key), !prefixes.contains(where: { key.hasPrefix($0) }) else { return nil }
            // `socket: /run/x.sock` where `socket:` takes keys beneath it: a path is the usual mistake, so `path` shows first.
            let path = key + ".path"
            let beneath = readKeys.filter { $0.hasPrefix(key + ".") }.sorted { (left: String, right: String) -> Bool in
                left == path || (right != path && left < right)
            }
            if !beneath.isEmpty {
                let shown = beneath.prefix(4).joined(separator: ", ") + (beneath.count > 4 ? ", …" : "")
                return ConfigurationError(
                    key: key, source: "\(file.path) line \(line)",
                    reason: "is a section, not a value: give its keys beneath it (\(shown); see systemd/pgherald.yaml)"
                )
            }
            let suggestion = KeySuggestion.closest(to: key, among: readKeys).map { "did you mean \($0)? " } ?? ""
            return ConfigurationError(
                key: key, source: "\(file.path) line \(line)",
                reason: "not a pgherald setting (\(suggestion)see systemd/pgherald.yaml for every key)"
            )
        }
    }

    /// Where a setting that pgherald no longer reads is still given, if anywhere; never rejected as unknown.
    public func retired(_ key: String) -> String? {
        readKeys.insert(key)
        return source(of: key)
    }

    public func fail(_ key: String, _ reason: String) -> ConfigurationError {
        ConfigurationError(key: key, source: source(of: key) ?? "default", reason: reason)
    }

    /// Records the value in force, for `check-config`.
    public func record(_ key: String, _ shown: String) {
        readKeys.insert(key)
        effective.append(EffectiveSetting(key: key, value: shown, source: source(of: key) ?? "default"))
    }

    /// - Parameter recorded: false when the caller records a shown form itself (a secret's redacted summary).
    public func string(_ key: String, default defaultValue: String? = nil, secret: Bool = false, recorded: Bool = true) -> String? {
        readKeys.insert(key)
        let value = reader.string(forKey: ConfigKey(key), isSecret: secret) ?? defaultValue
        if recorded { record(key, value.map(Self.quotedIfNeeded) ?? "(none)") }
        return value
    }

    /// A string with a default, so never nil.
    public func string(_ key: String, default defaultValue: String, secret: Bool = false, recorded: Bool = true) -> String {
        string(key, default: Optional(defaultValue), secret: secret, recorded: recorded) ?? defaultValue
    }

    public func int(_ key: String, default defaultValue: Int, in range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        readKeys.insert(key)
        guard reader.string(forKey: ConfigKey(key)) != nil else {
            record(key, String(defaultValue))
            return defaultValue
        }
        guard let value = reader.int(forKey: ConfigKey(key)) else {
            throw fail(key, "'\(reader.string(forKey: ConfigKey(key)) ?? "")' is not a whole number")
        }
        guard range.contains(value) else {
            let upper = range.upperBound == .max ? "" : " and \(range.upperBound)"
            throw fail(key, "\(value) is out of range: it must be \(range.upperBound == .max ? "at least \(range.lowerBound)" : "between \(range.lowerBound)\(upper)")")
        }
        record(key, String(value))
        return value
    }

    public func bool(_ key: String, default defaultValue: Bool) throws(ConfigurationError) -> Bool {
        readKeys.insert(key)
        guard let text = reader.string(forKey: ConfigKey(key)) else {
            record(key, String(defaultValue))
            return defaultValue
        }
        guard let value = reader.bool(forKey: ConfigKey(key)) else { throw fail(key, "'\(text)' is not true or false") }
        record(key, String(value))
        return value
    }

    /// A list (`[a, b]`, or one `- item` per line) or a single value; nil when not set.
    public func list(_ key: String, secret: Bool = false) -> [String]? {
        readKeys.insert(key)
        if let items = reader.stringArray(forKey: ConfigKey(key), isSecret: secret) { return items }
        return reader.string(forKey: ConfigKey(key), isSecret: secret).map { [$0] }
    }

    /// The names directly under `prefix` in the file (`webhooks.orders.url` gives `orders` under `webhooks`).
    public func fileSections(under prefix: String) -> [(name: String, line: Int)] {
        guard let file else { return [] }
        var sections: [String: Int] = [:]
        for (key, line) in file.lines where key.hasPrefix(prefix + ".") {
            let name = String(key.dropFirst(prefix.count + 1).prefix { $0 != "." })
            sections[name] = min(sections[name] ?? .max, line)
        }
        return sections.map { ($0.key, $0.value) }.sorted { $0.line < $1.line }
    }

    /// Whether the file sets `key` itself (a section left empty counts); marks it read.
    public func fileContains(_ key: String) -> Bool {
        readKeys.insert(key)
        return file?.source(of: key) != nil
    }

    /// The file's keys under `prefix`.
    public func fileKeys(under prefix: String) -> [String] {
        guard let file else { return [] }
        return file.lines.keys.filter { $0.hasPrefix(prefix + ".") }.sorted()
    }

    /// A value of a type written as text (a duration, a size, a choice); `expected` says what it should look like.
    public func value<Value: ExpressibleByConfigString>(
        _ key: String, default defaultValue: Value?, expected: String
    ) throws(ConfigurationError) -> Value? {
        readKeys.insert(key)
        guard let text = reader.string(forKey: ConfigKey(key)) else {
            record(key, defaultValue.map { "\($0)" } ?? "(none)")
            return defaultValue
        }
        guard let value = reader.string(forKey: ConfigKey(key), as: Value.self) else {
            throw fail(key, "'\(text.prefix(60))' is not \(expected)")
        }
        record(key, "\(value)")
        return value
    }

    /// A value with a default, so never nil.
    public func value<Value: ExpressibleByConfigString>(_ key: String, default defaultValue: Value, expected: String) throws(ConfigurationError) -> Value {
        try value(key, default: Optional(defaultValue), expected: expected) ?? defaultValue
    }

    /// A choice with a default, so never nil.
    public func choice<Choice: RawRepresentable & CaseIterable>(
        _ key: String, default defaultValue: Choice
    ) throws(ConfigurationError) -> Choice where Choice.RawValue == String {
        try choice(key, default: Optional(defaultValue)) ?? defaultValue
    }

    public func choice<Choice: RawRepresentable & CaseIterable>(
        _ key: String, default defaultValue: Choice?
    ) throws(ConfigurationError) -> Choice? where Choice.RawValue == String {
        readKeys.insert(key)
        guard let text = reader.string(forKey: ConfigKey(key)) else {
            record(key, defaultValue?.rawValue ?? "(none)")
            return defaultValue
        }
        guard let value = Choice(rawValue: text) else {
            throw fail(key, "'\(text.prefix(60))' is not one of \(Choice.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        record(key, value.rawValue)
        return value
    }

    private static func quotedIfNeeded(_ text: String) -> String {
        text.isEmpty || text.contains(where: { ": #'\"".contains($0) }) ? "'\(text.replacing("'", with: "''"))'" : text
    }
}
