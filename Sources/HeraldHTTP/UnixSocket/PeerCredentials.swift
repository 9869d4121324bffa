#if canImport(Glibc)
import Glibc
#endif
public import Herald
package import NIOCore

/// The process on the other end of a Unix-socket connection, as the kernel
/// recorded it when the peer connected (`SO_PEERCRED`): it cannot be forged.
public struct PeerCredentials: Sendable, Hashable {
    public var processID: Int32
    public var userID: UInt32
    public var groupID: UInt32

    /// `struct ucred` of <sys/socket.h>, laid out as the kernel writes it.
    private struct KernelCredentials: Sendable {
        package var pid: Int32 = 0
        package var uid: UInt32 = 0
        package var gid: UInt32 = 0
    }

    public init(processID: Int32, userID: UInt32, groupID: UInt32) {
        self.processID = processID
        self.userID = userID
        self.groupID = groupID
    }

    /// The credentials of `channel`'s peer; nil when the channel is not a socket that has them.
    package static func of(_ channel: any Channel) async -> PeerCredentials? {
        guard let provider = channel as? any SocketOptionProvider else { return nil }
        let future: EventLoopFuture<KernelCredentials> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED)
        )
        guard let credentials = try? await future.get() else { return nil }
        return PeerCredentials(processID: credentials.pid, userID: credentials.uid, groupID: credentials.gid)
    }

    /// The peer's identity: its user's name and groups, looked up now, so a
    /// change to `/etc/group` applies to the next stream.
    public func identity() -> PeerIdentity {
        var groups = [groupID]
        var name: String?
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        if getpwuid_r(userID, &entry, &buffer, buffer.count, &result) == 0, let found = result?.pointee.pw_name {
            name = String(cString: found)
            var count: Int32 = 64
            var list = [gid_t](repeating: 0, count: Int(count))
            if getgrouplist(found, groupID, &list, &count) < 0 {
                list = [gid_t](repeating: 0, count: Int(count))
                _ = getgrouplist(found, groupID, &list, &count)
            }
            groups += list.prefix(Int(max(0, count))).filter { $0 != groupID }
        }
        return PeerIdentity(processID: processID, userID: userID, groupIDs: groups, userName: name)
    }
}
