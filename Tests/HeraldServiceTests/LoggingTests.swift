@testable import HeraldService
import Logging
import Testing

@Suite struct LogLevelsTests {
    @Test func parsesDefaultAndOverrides() throws {
        let levels = try LogLevels(parsing: "warning,database=debug, socket=trace")
        #expect(levels.defaultLevel == .warning)
        #expect(levels.level(for: "database") == .debug)
        #expect(levels.level(for: "socket") == .trace)
        #expect(levels.level(for: "broker") == .warning)
        #expect(levels.level(for: "somebody-elses-label") == .warning)
    }

    @Test(arguments: ["loud", "info,db=debug", "info,,database=debug", "database=verbose", ""])
    func rejectsUnknownNames(text: String) {
        #expect(throws: LogLevelsError.self) { try LogLevels(parsing: text) }
    }
}

@Suite struct HeraldLogHandlerTests {
    let timestamp = LogTimestamp(seconds: 1_795_262_400, nanoseconds: 123_456_789)

    func handler(_ format: LogFormat) -> HeraldLogHandler {
        HeraldLogHandler(category: "database", level: .info, format: format, journalPrefix: false, colour: false)
    }

    @Test func json() {
        let line = handler(.json).render(level: .warning, message: "say \"hi\"", metadata: ["b": "2", "a": "x y"], at: timestamp)
        #expect(line == #"{"ts":"2026-11-21T12:00:00.123Z","level":"warning","category":"database","msg":"say \"hi\"","a":"x y","b":"2"}"#)
    }

    @Test func logfmt() {
        let line = handler(.logfmt).render(level: .info, message: "listening", metadata: ["server": "host=/tmp port=5"], at: timestamp)
        #expect(line == #"ts=2026-11-21T12:00:00.123Z level=info category=database msg=listening server="host=/tmp port=5""#)
    }

    @Test func pretty() {
        let line = handler(.pretty).render(level: .error, message: "lost", metadata: [:], at: timestamp)
        #expect(line == "12:00:00.123 ERROR    database  lost")
    }

    /// A topic that ends a line and starts a forged one, with a terminal escape, as a refused join logs it.
    static let forgery = "room\r\nts=2026-11-21T12:00:00.000Z level=critical category=database msg=\"owned\" \u{1B}[2J\u{85}\u{2028}\u{7F}\u{0}"

    @Test(arguments: [LogFormat.logfmt, .pretty, .json])
    func noClientTextBreaksALineOrReachesATerminal(_ format: LogFormat) {
        let line = handler(format).render(level: .info, message: "refused \(Self.forgery)", metadata: ["topic": "\(Self.forgery)"], at: timestamp)
        // JSON escapes C0 (CR, LF, ESC among them) by its own rule; a reader decodes the rest as text, never as a line.
        let controls = line.unicodeScalars.filter { format == .json ? $0.value < 0x20 : TerminalText.isControl($0) }
        #expect(controls.isEmpty, "\(format): \(controls.map(\.value)) in \(line)")
        if format != .json {
            #expect(line.contains(#"topic="room\r\nts=2026-11-21T12:00:00.000Z level=critical category=database msg=\"owned\" \u{1b}[2J\u{85}\u{2028}\u{7f}\u{0}""#), "\(line)")
        }
    }

    @Test func syslogPriorities() {
        #expect(HeraldLogHandler.syslogPriority(.debug) == 7)
        #expect(HeraldLogHandler.syslogPriority(.info) == 6)
        #expect(HeraldLogHandler.syslogPriority(.warning) == 4)
        #expect(HeraldLogHandler.syslogPriority(.error) == 3)
        #expect(HeraldLogHandler.syslogPriority(.critical) == 2)
    }
}
