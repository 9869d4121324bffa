#if canImport(Glibc)
import Glibc
#endif
public import HeraldSettings

/// How many connections one peer address may hold on a TCP listener, so that one client cannot take
/// the listener's whole limit; proxies in front, whose connections stand for many clients, are not limited.
public struct AddressLimit: Sendable, Equatable {
    /// `PREFIX.max_connections_per_address`. Default 1,000; 0 turns it off.
    public var connections: Int
    /// `PREFIX.proxies`: addresses not limited per address, such as an nginx on the same host. Default: loopback (127.0.0.1, ::1).
    public var proxies: [String]

    public init(connections: Int = 1_000, proxies: [String] = ["127.0.0.1", "::1"]) {
        self.connections = connections
        self.proxies = proxies
    }

    /// The limit of the listener whose settings are under `prefix` (`http`, `realtime`).
    package init(under prefix: String, _ settings: SettingsReader) throws(ConfigurationError) {
        let defaults = AddressLimit()
        let connections = try settings.int("\(prefix).max_connections_per_address", default: defaults.connections, in: 0...Int.max)
        let proxies = settings.list("\(prefix).proxies") ?? defaults.proxies
        settings.record("\(prefix).proxies", proxies.isEmpty ? "(none)" : proxies.joined(separator: ", "))
        for proxy in proxies where !Self.isIPAddress(proxy) {
            throw settings.fail("\(prefix).proxies", "'\(proxy)' is not an IP address, such as 127.0.0.1 or ::1")
        }
        self.init(connections: connections, proxies: proxies)
    }

    /// Whether `text` is an IPv4 or IPv6 address, as peers' addresses are compared.
    static func isIPAddress(_ text: String) -> Bool {
        var bytes = [UInt8](repeating: 0, count: 16)
        return inet_pton(AF_INET, text, &bytes) == 1 || inet_pton(AF_INET6, text, &bytes) == 1
    }

    /// The listener's counter: `limit` connections in all, and this limit per address.
    package func counter(limit: Int, key prefix: String) -> SocketLimitsHandler.Counter {
        SocketLimitsHandler.Counter(limit: limit, perAddress: connections, perAddressKey: "\(prefix).max_connections_per_address", proxies: Set(proxies))
    }
}
