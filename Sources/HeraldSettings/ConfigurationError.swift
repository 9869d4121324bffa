/// A setting that cannot be used, with the key, where its value came from,
/// and why. `serve` and `check-config` exit with ``exitCode`` on one.
public struct ConfigurationError: Error, Hashable, CustomStringConvertible {
    /// sysexits.h's EX_CONFIG.
    public static let exitCode: Int32 = 78

    /// The key as written in the file, such as `socket.max_subscribers`.
    public var key: String
    /// Where the value came from: `pgherald.yaml line 12`, `PGHERALD_SOCKET_MODE`, `--socket-mode`.
    public var source: String
    public var reason: String

    public init(key: String, source: String, reason: String) {
        self.key = key
        self.source = source
        self.reason = reason
    }

    public var description: String { "\(key) (\(source)): \(reason)" }
}
