#if canImport(Glibc)
import Glibc
#endif
import Herald

/// Pulls the two fields the benchmark needs out of an event's JSON without
/// decoding it, so that the load client is never the bottleneck.
enum EventFields {
    /// The value of `"count":N`.
    static func count(in line: UnsafeRawBufferPointer) -> UInt64? {
        number(in: line, after: find(#""count":"#, in: line))
    }

    /// Microseconds since the epoch of the event's `at` (`2026-11-21T12:00:00.123456Z`),
    /// as the daemon writes it (`"at":"`) or as the trigger does (`"at" : "`).
    ///
    /// Both put `at` after the rows, so it is looked for from the end: from
    /// the start, every quote in the rows would be a candidate.
    static func timestamp(in line: UnsafeRawBufferPointer) -> Int64? {
        guard var start = findLast(#""at""#, in: line) else { return nil }
        while start < line.count, line[start] == UInt8(ascii: " ") || line[start] == UInt8(ascii: ":") || line[start] == UInt8(ascii: "\"") {
            start += 1
        }
        return time(in: line, at: start, fractionDigits: 6)
    }

    /// Microseconds since the epoch of a Supabase Realtime change's
    /// `commit_timestamp` (`2026-11-21T12:00:00.123Z`): milliseconds, so a
    /// latency measured from it reads up to 1 ms high.
    static func commitTimestamp(in line: UnsafeRawBufferPointer) -> Int64? {
        find(#""commit_timestamp":""#, in: line).flatMap { time(in: line, at: $0, fractionDigits: 3) }
    }

    /// The `id` column of a Supabase Realtime change's `record`, which the
    /// benchmark's table fills from a sequence: it rises by one per event, as `count` does.
    static func recordID(in line: UnsafeRawBufferPointer) -> UInt64? {
        number(in: line, after: find(#""record":{"id":"#, in: line))
    }

    /// The `id` of an `/events` event's key (`"pk":{"id":N`): with one writer
    /// on a table whose `id` comes from a sequence, it rises by one per event
    /// of that table, as `count` does across all tables.
    static func keyID(in line: UnsafeRawBufferPointer) -> UInt64? {
        number(in: line, after: find(#""pk":{"id":"#, in: line))
    }

    /// Each event's `count` and `at` in a transaction frame's
    /// `{"txid":…,"count":N,"events":[{…},…]}`, in order.
    static func groupedEvents(in line: UnsafeRawBufferPointer) -> [(count: UInt64, at: Int64)] {
        guard var start = find(#""events":["#, in: line) else { return [] }
        var events: [(count: UInt64, at: Int64)] = []
        // The daemon writes count first and at last, right after txid; the rows lie between.
        while let countStart = find(#""count":"#, in: UnsafeRawBufferPointer(rebasing: line[start...])).map({ $0 + start }),
            let count = number(in: line, after: countStart),
            let txid = find(#""txid":""#, in: UnsafeRawBufferPointer(rebasing: line[countStart...])).map({ $0 + countStart }),
            let at = find(#""at":""#, in: UnsafeRawBufferPointer(rebasing: line[txid...])).map({ $0 + txid }),
            let time = time(in: line, at: at, fractionDigits: 6)
        {
            events.append((count, time))
            start = at
        }
        return events
    }

    private static func number(in line: UnsafeRawBufferPointer, after start: Int?) -> UInt64? {
        guard var index = start else { return nil }
        var value: UInt64 = 0
        let first = index
        while index < line.count, line[index] >= UInt8(ascii: "0"), line[index] <= UInt8(ascii: "9") {
            value = value * 10 + UInt64(line[index] - UInt8(ascii: "0"))
            index += 1
        }
        return index > first ? value : nil
    }

    /// `YYYY-MM-DDTHH:MM:SS.F…` starting at `start`, with `fractionDigits` digits of fraction.
    private static func time(in line: UnsafeRawBufferPointer, at start: Int, fractionDigits: Int) -> Int64? {
        guard start + 20 + fractionDigits <= line.count else { return nil }
        func digits(_ offset: Int, _ length: Int) -> Int64 {
            var value: Int64 = 0
            for index in start + offset..<start + offset + length {
                value = value * 10 + Int64(line[index] &- UInt8(ascii: "0"))
            }
            return value
        }
        let (year, month, day) = (digits(0, 4), digits(5, 2), digits(8, 2))
        let seconds = digits(11, 2) * 3600 + digits(14, 2) * 60 + digits(17, 2)
        var fraction = digits(20, fractionDigits)
        for _ in fractionDigits..<6 { fraction *= 10 }
        let days = Int64(PostgresTimestamp.daysFromCivil(year: Int(year), month: Int(month), day: Int(day)))
        return (days * 86400 + seconds) * 1_000_000 + fraction
    }

    private static func find(_ needle: StaticString, in line: UnsafeRawBufferPointer) -> Int? {
        guard let base = line.baseAddress else { return nil }
        let length = needle.utf8CodeUnitCount
        var index = 0
        while index + length <= line.count {
            guard let hit = memchr(base + index, Int32(needle.utf8Start[0]), line.count - length - index + 1) else { return nil }
            index = base.distance(to: UnsafeRawPointer(hit))
            if memcmp(base + index, needle.utf8Start, length) == 0 { return index + length }
            index += 1
        }
        return nil
    }

    private static func findLast(_ needle: StaticString, in line: UnsafeRawBufferPointer) -> Int? {
        guard let base = line.baseAddress else { return nil }
        let length = needle.utf8CodeUnitCount
        var index = line.count - length
        while index >= 0 {
            if line[index] == needle.utf8Start[0], memcmp(base + index, needle.utf8Start, length) == 0 { return index + length }
            index -= 1
        }
        return nil
    }
}

/// Wall-clock microseconds since the epoch, the clock the events' `at` uses.
func nowMicroseconds() -> Int64 {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return Int64(spec.tv_sec) * 1_000_000 + Int64(spec.tv_nsec) / 1000
}

/// CPU seconds (user and system) this process has used.
func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    let seconds = usage.ru_utime.tv_sec + usage.ru_stime.tv_sec
    let microseconds = usage.ru_utime.tv_usec + usage.ru_stime.tv_usec
    return Double(seconds) + Double(microseconds) / 1e6
}
