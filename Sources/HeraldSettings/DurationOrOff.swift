public import Configuration

/// A ``HumanDuration``, or zero in any unit (`0s`, `0`) to turn off what it times.
public struct DurationOrOff: Sendable, Hashable, CustomStringConvertible, ExpressibleByConfigString, ExpressibleByStringLiteral {
    public let duration: Duration
    public let description: String

    public init?(configString text: String) {
        if let parsed = HumanDuration(configString: text) {
            duration = parsed.duration
            description = parsed.description
            return
        }
        let number = ["ms", "s", "m", "h", "d"].first { text.hasSuffix($0) }.map { text.dropLast($0.count) } ?? Substring(text)
        guard Double(number) == 0 else { return nil }
        duration = .zero
        description = "0s (off)"
    }

    /// A default written in the source, such as `"2m" as DurationOrOff`.
    public init(stringLiteral text: String) {
        guard let parsed = DurationOrOff(configString: text) else { preconditionFailure("'\(text)' is not a duration") }
        self = parsed
    }
}
