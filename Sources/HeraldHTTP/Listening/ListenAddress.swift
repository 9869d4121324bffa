/// A TCP listener's address: `HOST:PORT`, or `[::1]:PORT` for IPv6.
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), colon > text.startIndex,
              let port = Int(text[text.index(after: colon)...]), (1...65_535).contains(port) else { return nil }
        host = String(text[..<colon]).trimmingCharacters(in: ["[", "]"])
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
