public import Foundation

/// Reads the timestamps PostgreSQL writes into JSON (`row_to_json`, `to_json`):
/// `date` (`2026-11-26`), `timestamp` (`2026-11-26T10:00:00.123456`) and
/// `timestamptz` (`2026-11-26T10:00:00.123456+00:00`, in the session's zone),
/// with zero to six digits of fraction. A value without a zone is taken as UTC.
/// `infinity` and `-infinity` become `Date.distantFuture` and `.distantPast`.
public enum PostgresTimestamp {
    public static func parse(_ text: String) -> Date? {
        switch text {
        case "infinity": return .distantFuture
        case "-infinity": return .distantPast
        default: break
        }
        let bytes = Array(text.utf8)
        var index = 0
        func number(_ digits: Int) -> Int? {
            guard index + digits <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<(index + digits)] {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            index += digits
            return value
        }
        func skip(_ separator: Character) -> Bool {
            guard index < bytes.count, bytes[index] == UInt8(ascii: separator.unicodeScalars.first!) else { return false }
            index += 1
            return true
        }
        guard let year = number(4), skip("-"), let month = number(2), skip("-"), let day = number(2),
              (1...12).contains(month), (1...31).contains(day) else { return nil }
        var seconds = Double(daysFromCivil(year: year, month: month, day: day)) * 86_400
        if index == bytes.count { return Date(timeIntervalSince1970: seconds) }
        guard skip("T") || skip(" "), let hour = number(2), skip(":"), let minute = number(2), skip(":"), let second = number(2),
              hour < 24, minute < 60, second < 61 else { return nil }
        seconds += Double(hour * 3600 + minute * 60 + second)
        if skip(".") {
            var fraction = 0.0
            var scale = 0.1
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
                fraction += Double(bytes[index] - UInt8(ascii: "0")) * scale
                scale /= 10
                index += 1
            }
            seconds += fraction
        }
        if index == bytes.count { return Date(timeIntervalSince1970: seconds) }
        if skip("Z"), index == bytes.count { return Date(timeIntervalSince1970: seconds) }
        let sign: Double
        if skip("+") { sign = 1 } else if skip("-") { sign = -1 } else { return nil }
        guard let offsetHours = number(2) else { return nil }
        var offset = offsetHours * 3600
        if skip(":") {
            guard let offsetMinutes = number(2) else { return nil }
            offset += offsetMinutes * 60
            if skip(":") {
                guard let offsetSeconds = number(2) else { return nil }
                offset += offsetSeconds
            }
        }
        guard index == bytes.count else { return nil }
        return Date(timeIntervalSince1970: seconds - sign * Double(offset))
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    public static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let shifted = month <= 2 ? year - 1 : year
        let era = (shifted >= 0 ? shifted : shifted - 399) / 400
        let yearOfEra = shifted - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
