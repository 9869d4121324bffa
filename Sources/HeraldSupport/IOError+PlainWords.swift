#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
public import NIOCore

extension IOError {
    /// The system's words for the failure, without NIO's system call and
    /// errno: `address already in use` rather than
    /// `bind(descriptor:ptr:bytes:): Address already in use) (errno: 98)`.
    public var plainWords: String {
        String(cString: strerror(errnoCode)).lowercased()
    }
}
