public import Foundation

/// The `Retry-After` response header: delay-seconds or an HTTP-date (RFC 9110 §10.2.3).
public enum RetryAfter {
    /// The wait the header asks for, never negative; nil when it is neither form.
    public static func parse(_ value: String, now: Date = Date()) -> Duration? {
        let text = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Int64(text), seconds >= 0 { return .seconds(seconds) }
        for format in formats {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: text) {
                return .milliseconds(Int64(max(0, date.timeIntervalSince(now)) * 1000))
            }
        }
        return nil
    }

    /// IMF-fixdate, then the obsolete RFC 850 and asctime forms that recipients must accept.
    private static let formats = ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"]
}
