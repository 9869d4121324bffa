#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HeraldSupport
import NIOCore

/// A TCP listener that cannot start, named by its setting and address and
/// said in plain words: `http.listen 127.0.0.1:8080: address already in use;
/// stop what listens there, or choose another port`.
struct ListenFailure: Error, Sendable, CustomStringConvertible {
    /// The setting that names the address: `http.listen`, `realtime.listen`, `metrics.listen`, `console.listen`.
    package var key: String
    package var address: ListenAddress
    /// What went wrong, and what to do about it.
    package var reason: String

    /// NIO's bind error, translated.
    package init(key: String, address: ListenAddress, error: any Error) {
        self.key = key
        self.address = address
        reason = Self.reason(for: error, key: key)
    }

    private static func reason(for error: any Error, key: String) -> String {
        if let error = error as? IOError {
            switch error.errnoCode {
            case EADDRINUSE: return "address already in use; stop what listens there, or choose another port for \(key)"
            case EACCES: return "permission denied; a port below 1024 needs root or CAP_NET_BIND_SERVICE"
            case EADDRNOTAVAIL: return "no interface of this machine has that address; use one it has, or 0.0.0.0"
            default: return error.plainWords
            }
        }
        if error is SocketAddressError { return "cannot resolve the host; use an IP address, or a name this machine resolves" }
        return "\(error)"
    }

    package var description: String { "\(key) \(address): \(reason)" }
}
