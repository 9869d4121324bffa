import ArgumentParser

/// A duration on the command line: a number with a unit, `s`, `m`, `h` or `d` (`90s`, `30m`, `24h`, `7d`).
struct HumanDuration: ExpressibleByArgument, CustomStringConvertible {
    let duration: Duration
    let description: String

    init?(argument: String) {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        guard let unit = argument.last, let scale = units[unit],
              let value = Double(argument.dropLast()), value.isFinite, value > 0 else { return nil }
        duration = .milliseconds(Int64(value * scale * 1000))
        description = argument
    }

    static var defaultCompletionKind: CompletionKind { .default }
}
