#if canImport(Glibc)
import Glibc
#endif

/// What one stream received: latencies, and whether counts arrived complete and in order.
struct StreamRecord {
    var received = 0
    var lastCount: UInt64 = 0
    var outOfOrder = 0
    var latenciesMicroseconds: [Int64] = []
    var partialLine: [UInt8] = []

    /// Consumes NDJSON bytes; every complete line is one event.
    mutating func consume(_ bytes: UnsafeRawBufferPointer, now: Int64) {
        var start = 0
        for index in 0..<bytes.count where bytes[index] == UInt8(ascii: "\n") {
            if partialLine.isEmpty {
                record(UnsafeRawBufferPointer(rebasing: bytes[start..<index]), now: now)
            } else {
                partialLine.append(contentsOf: bytes[start..<index])
                let line = partialLine
                partialLine.removeAll(keepingCapacity: true)
                line.withUnsafeBytes { record($0, now: now) }
            }
            start = index + 1
        }
        partialLine.append(contentsOf: bytes[start..<bytes.count])
    }

    mutating func record(_ line: UnsafeRawBufferPointer, now: Int64) {
        // Blank lines are heartbeats.
        guard let count = Self.number(after: #","count":"#, in: line), let at = Self.timestamp(in: line) else { return }
        received += 1
        if lastCount != 0, count != lastCount + 1 { outOfOrder += 1 }
        lastCount = count
        latenciesMicroseconds.append(now - at)
    }

    private static func find(_ needle: String, in line: UnsafeRawBufferPointer) -> Int? {
        let pattern = Array(needle.utf8)
        guard line.count >= pattern.count else { return nil }
        var index = 0
        while index <= line.count - pattern.count {
            if line[index] == pattern[0], (0..<pattern.count).allSatisfy({ line[index + $0] == pattern[$0] }) {
                return index + pattern.count
            }
            index += 1
        }
        return nil
    }

    static func number(after key: String, in line: UnsafeRawBufferPointer) -> UInt64? {
        guard var index = find(key, in: line) else { return nil }
        var value: UInt64 = 0
        while index < line.count, line[index] >= UInt8(ascii: "0"), line[index] <= UInt8(ascii: "9") {
            value = value * 10 + UInt64(line[index] - UInt8(ascii: "0"))
            index += 1
        }
        return value
    }

    /// Microseconds since the epoch of the event's `at` (`2026-11-21T12:00:00.123456Z`),
    /// as the daemon writes it (`"at":"`) or as the trigger does (`"at" : "`).
    static func timestamp(in line: UnsafeRawBufferPointer) -> Int64? {
        guard var start = find(#""at""#, in: line) else { return nil }
        while start < line.count, [UInt8(ascii: " "), UInt8(ascii: ":"), UInt8(ascii: "\"")].contains(line[start]) { start += 1 }
        guard start + 26 <= line.count else { return nil }
        func digits(_ offset: Int, _ length: Int) -> Int64 {
            (0..<length).reduce(0) { $0 * 10 + Int64(line[start + offset + $1] - UInt8(ascii: "0")) }
        }
        let (year, month, day) = (digits(0, 4), digits(5, 2), digits(8, 2))
        let seconds = digits(11, 2) * 3600 + digits(14, 2) * 60 + digits(17, 2)
        return (daysSinceEpoch(year: year, month: month, day: day) * 86400 + seconds) * 1_000_000 + digits(20, 6)
    }

    /// Days from 1970-01-01 to a civil date (proleptic Gregorian).
    private static func daysSinceEpoch(year: Int64, month: Int64, day: Int64) -> Int64 {
        let shifted = month <= 2 ? year - 1 : year
        let era = (shifted >= 0 ? shifted : shifted - 399) / 400
        let yearOfEra = shifted - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}

/// Wall-clock microseconds since the epoch, the clock the events' `at` uses.
func nowMicroseconds() -> Int64 {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return Int64(spec.tv_sec) * 1_000_000 + Int64(spec.tv_nsec) / 1000
}
