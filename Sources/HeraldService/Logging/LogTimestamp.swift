#if canImport(Glibc)
import Glibc
#endif

/// A wall-clock instant, formatted for log lines and event times.
struct LogTimestamp {
    var seconds: Int
    var nanoseconds: Int

    static func now() -> LogTimestamp {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return LogTimestamp(seconds: spec.tv_sec, nanoseconds: spec.tv_nsec)
    }

    private var brokenDown: tm {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        return parts
    }

    private var milliseconds: String { Self.pad(nanoseconds / 1_000_000, 3) }

    /// `2026-11-21T12:00:00.123Z`
    var iso8601: String {
        let parts = brokenDown
        return "\(Self.pad(Int(parts.tm_year) + 1900, 4))-\(Self.pad(Int(parts.tm_mon) + 1, 2))-\(Self.pad(Int(parts.tm_mday), 2))T"
            + "\(Self.pad(Int(parts.tm_hour), 2)):\(Self.pad(Int(parts.tm_min), 2)):\(Self.pad(Int(parts.tm_sec), 2)).\(milliseconds)Z"
    }

    /// `12:00:00.123` (UTC)
    var timeOfDay: String {
        let parts = brokenDown
        return "\(Self.pad(Int(parts.tm_hour), 2)):\(Self.pad(Int(parts.tm_min), 2)):\(Self.pad(Int(parts.tm_sec), 2)).\(milliseconds)"
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }
}
