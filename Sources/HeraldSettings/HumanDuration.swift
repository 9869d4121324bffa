public import Configuration

/// A duration written with a unit: `500ms`, `90s`, `30m`, `24h`, `7d`; a bare number is seconds.
public struct HumanDuration: Sendable, Hashable, CustomStringConvertible, ExpressibleByConfigString, ExpressibleByStringLiteral {
    public let duration: Duration
    public let description: String

    /// A bare number is seconds, as the flags took it before units.
    public init?(configString text: String) {
        if let seconds = Double(text), seconds.isFinite, seconds > 0 {
            duration = .milliseconds(Int64((seconds * 1000).rounded()))
            description = "\(text)s"
            return
        }
        let units: [(suffix: String, seconds: Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]
        guard let unit = units.first(where: { text.hasSuffix($0.suffix) }),
              let value = Double(text.dropLast(unit.suffix.count)), value.isFinite, value > 0 else { return nil }
        duration = .milliseconds(Int64((value * unit.seconds * 1000).rounded()))
        description = text
    }

    /// A default written in the source, such as `"10s" as HumanDuration`.
    public init(stringLiteral text: String) {
        guard let parsed = HumanDuration(configString: text) else { preconditionFailure("'\(text)' is not a duration") }
        self = parsed
    }
}
