import Logging
import Testing
@testable import HeraldServer

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

    @Test func syslogPriorities() {
        #expect(HeraldLogHandler.syslogPriority(.debug) == 7)
        #expect(HeraldLogHandler.syslogPriority(.info) == 6)
        #expect(HeraldLogHandler.syslogPriority(.warning) == 4)
        #expect(HeraldLogHandler.syslogPriority(.error) == 3)
        #expect(HeraldLogHandler.syslogPriority(.critical) == 2)
    }
}
