extension Event {
    /// `at` as nanoseconds since 1970, or nil if it is not the trigger's
    /// `YYYY-MM-DDTHH:MM:SS[.ffffff]Z`. Read by hand: it runs for every
    /// event, to measure delivery lag, and a formatter costs microseconds.
    public var atNanosecondsSince1970: Int64? {
        var utf8 = Array(at.utf8)
        guard utf8.count >= 20, utf8.removeLast() == UInt8(ascii: "Z") else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            var value: Int64 = 0
            for byte in utf8[range] {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard utf8[4] == UInt8(ascii: "-"), utf8[7] == UInt8(ascii: "-"), utf8[10] == UInt8(ascii: "T"),
              utf8[13] == UInt8(ascii: ":"), utf8[16] == UInt8(ascii: ":"),
              let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), (1...31).contains(day) else { return nil }
        var nanoseconds: Int64 = 0
        if utf8.count > 19 {
            guard utf8[19] == UInt8(ascii: "."), utf8.count > 20, utf8.count <= 29, let fraction = number(20..<utf8.count) else { return nil }
            nanoseconds = fraction
            for _ in 0..<(9 - (utf8.count - 20)) { nanoseconds *= 10 }
        }
        // Days from the civil date (Howard Hinnant's algorithm).
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = shiftedYear / 400
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return ((days * 86_400 + hour * 3600 + minute * 60 + second) * 1_000_000_000) + nanoseconds
    }
}

extension Event {
    /// Time from the trigger's `at` to `now` (nanoseconds since 1970), zero
    /// if `at` lies ahead (clocks apart); nil when `at` cannot be read.
    public func age(now nanosecondsSince1970: Int64) -> Duration? {
        atNanosecondsSince1970.map { .nanoseconds(max(0, nanosecondsSince1970 - $0)) }
    }
}
