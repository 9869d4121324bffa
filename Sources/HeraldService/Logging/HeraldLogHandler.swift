#if canImport(Glibc)
import Glibc
#endif
import Herald
public import Logging

/// Writes one line per log record to standard error, in the chosen format,
/// with the category on every line.
///
/// Under systemd (`JOURNAL_STREAM` set) each line starts with `<N>`, the
/// syslog priority, so the journal keeps levels.
public struct HeraldLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public let category: String
    private var fixedLevel: Logger.Level
    private let fixedFormat: LogFormat
    /// When set, level and format follow it, so a reload reaches loggers that already exist.
    private let live: LiveLogSettings?
    let journalPrefix: Bool
    let colour: Bool

    public init(category: String, level: Logger.Level, format: LogFormat, journalPrefix: Bool, colour: Bool) {
        self.category = category
        self.fixedLevel = level
        self.fixedFormat = format
        self.live = nil
        self.journalPrefix = journalPrefix
        self.colour = colour
    }

    init(category: String, live: LiveLogSettings, journalPrefix: Bool, colour: Bool) {
        let current = live.current
        self.category = category
        self.fixedLevel = .trace
        self.fixedFormat = current.format
        self.live = live
        self.journalPrefix = journalPrefix
        self.colour = colour
    }

    /// With live settings, a level set here is a floor under the live one: a reload still reaches the
    /// logger, and a logger quieted for a library (`Logger.forHummingbird`) stays quieter.
    public var logLevel: Logger.Level {
        get { live.map { max($0.current.levels.level(for: category), fixedLevel) } ?? fixedLevel }
        set { fixedLevel = newValue }
    }

    var format: LogFormat { live?.current.format ?? fixedFormat }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        var line = journalPrefix ? "<\(Self.syslogPriority(event.level))>" : ""
        line += render(level: event.level, message: event.message.description, metadata: merged, at: LogTimestamp.now())
        line += "\n"
        var bytes = Array(line.utf8)
        bytes.withUnsafeMutableBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(STDERR_FILENO, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return }
                offset += written
            }
        }
    }

    func render(level: Logger.Level, message: String, metadata: Logger.Metadata, at timestamp: LogTimestamp) -> String {
        let keys = metadata.keys.sorted()
        switch format {
        case .json:
            var writer = JSONWriter()
            writer.writeRaw(UInt8(ascii: "{"))
            writer.writeKey("ts", first: true)
            writer.write(string: timestamp.iso8601)
            writer.writeKey("level")
            writer.write(string: level.rawValue)
            writer.writeKey("category")
            writer.write(string: category)
            writer.writeKey("msg")
            writer.write(string: message)
            for key in keys {
                writer.writeRaw(UInt8(ascii: ","))
                writer.write(string: key)
                writer.writeRaw(UInt8(ascii: ":"))
                writer.write(string: metadata[key]!.description)
            }
            writer.writeRaw(UInt8(ascii: "}"))
            return String(decoding: writer.bytes, as: UTF8.self)
        case .logfmt:
            var fields = ["ts=\(timestamp.iso8601)", "level=\(level.rawValue)", "category=\(category)", "msg=\(Self.logfmtValue(message))"]
            fields += keys.map { "\($0)=\(Self.logfmtValue(metadata[$0]!.description))" }
            return fields.joined(separator: " ")
        case .pretty:
            let levelText = level.rawValue.uppercased().padding(to: 8)
            let styledLevel = colour ? "\u{1B}[\(Self.colourCode(level))m\(levelText)\u{1B}[0m" : levelText
            var line = "\(timestamp.timeOfDay) \(styledLevel) \(category.padding(to: 9)) \(TerminalText.escaped(message, quote: false))"
            for key in keys { line += " \(key)=\(Self.logfmtValue(metadata[key]!.description))" }
            return line
        }
    }

    /// A logfmt value: quoted when it must be, and with every control
    /// character escaped, so that no text a client sends (a topic, a
    /// header) can break a line or forge the next one.
    static func logfmtValue(_ value: String) -> String {
        let needsQuotes = value.isEmpty || value.unicodeScalars.contains { $0 == " " || $0 == "=" || $0 == "\"" || $0 == "\\" || TerminalText.isControl($0) }
        guard needsQuotes else { return value }
        return "\"" + TerminalText.escaped(value, quote: true) + "\""
    }

    static func syslogPriority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: return 7
        case .info: return 6
        case .notice: return 5
        case .warning: return 4
        case .error: return 3
        case .critical: return 2
        }
    }

    private static func colourCode(_ level: Logger.Level) -> String {
        switch level {
        case .trace, .debug: return "2"
        case .info: return "32"
        case .notice: return "36"
        case .warning: return "33"
        case .error, .critical: return "31;1"
        }
    }
}

extension String {
    fileprivate func padding(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
