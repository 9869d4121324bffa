/// A setting that cannot be used, with the key, where its value came from,
/// and why. `serve` and `check-config` exit with ``exitCode`` on one, which
/// carries every other mistake found in the same reading (``further``), so
/// that one run reports them all.
public struct ConfigurationError: Error, Hashable, CustomStringConvertible {
    /// sysexits.h's EX_CONFIG.
    public static let exitCode: Int32 = 78

    /// The key as written in the file, such as `socket.max_subscribers`.
    public var key: String
    /// Where the value came from: `pgherald.yaml line 12`, `PGHERALD_SOCKET_MODE`, `--socket-mode`.
    public var source: String
    public var reason: String
    /// The other mistakes of the same configuration, in the order they were found.
    public var further: [ConfigurationError] = []

    public init(key: String, source: String, reason: String) {
        self.key = key
        self.source = source
        self.reason = reason
    }

    /// One line for each mistake.
    public var description: String {
        ([self] + further).map { "\($0.key) (\($0.source)): \($0.reason)" }.joined(separator: "\n")
    }

    /// The first of `mistakes`, carrying the rest; nil when there are none.
    public init?(all mistakes: [ConfigurationError]) {
        guard var first = mistakes.first else { return nil }
        first.further += mistakes.dropFirst().flatMap { [ConfigurationError(key: $0.key, source: $0.source, reason: $0.reason)] + $0.further }
        self = first
    }
}
