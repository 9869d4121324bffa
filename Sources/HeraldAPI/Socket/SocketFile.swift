#if canImport(Glibc)
import Glibc
#endif
import HeraldSupport

/// Why the socket file cannot be used.
public struct SocketFileError: Error, Hashable, CustomStringConvertible {
    public var description: String
}

/// The socket file's life cycle: refuse a live one, replace a stale one,
/// set its permissions, and remove it only if it is still ours.
enum SocketFile {
    /// Makes `path` free for binding.
    ///
    /// A socket that accepts connections belongs to a running daemon and is
    /// never taken over. One that refuses them was left by a crash and is
    /// removed. Anything that is not a socket is left alone.
    /// - Returns: whether a stale socket was removed.
    static func prepare(_ path: String) throws(SocketFileError) -> Bool {
        try checkBindable(path)
        var status = stat()
        guard lstat(path, &status) == 0 else {
            if errno == ENOENT { return false }
            throw SocketFileError(description: "cannot inspect \(path): \(String(cString: strerror(errno)))")
        }
        guard status.st_mode & S_IFMT == S_IFSOCK else {
            throw SocketFileError(description: "\(path) exists and is not a socket; refusing to replace it")
        }
        switch UnixSocketProbe.connectError(path) {
        case 0:
            throw SocketFileError(description: "socket.path \(path): another process serves it (is pgherald already running?); stop it, or choose another socket.path")
        case ECONNREFUSED:
            guard unlink(path) == 0 || errno == ENOENT else {
                throw SocketFileError(description: "cannot remove stale socket \(path): \(String(cString: strerror(errno)))")
            }
            return true
        case let error:
            throw SocketFileError(description: "cannot check whether \(path) is in use: \(String(cString: strerror(error)))")
        }
    }

    /// Fails with the path and what to change when bind(2) could not succeed.
    static func checkBindable(_ path: String) throws(SocketFileError) {
        let length = path.utf8.count
        guard length <= UnixSocketProbe.maximumPathLength else {
            throw SocketFileError(description: "socket path \(path) is \(length) bytes, longer than the \(UnixSocketProbe.maximumPathLength) a Unix socket allows; choose a shorter --socket")
        }
        let directory = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        if directory == SocketConfiguration.privateDirectory() { try makePrivateDirectory(directory) }
        var status = stat()
        guard stat(directory.isEmpty ? "/" : directory, &status) == 0 else {
            let reason = errno == ENOENT ? "does not exist; create it or choose another --socket" : String(cString: strerror(errno))
            throw SocketFileError(description: "cannot create socket \(path): directory \(directory) \(reason)")
        }
        guard status.st_mode & S_IFMT == S_IFDIR else {
            throw SocketFileError(description: "cannot create socket \(path): \(directory) is not a directory")
        }
    }

    /// Makes the default socket's folder, readable by its user alone, or checks that the one there is
    /// theirs and closed to others: in /tmp, anyone could have made it first.
    static func makePrivateDirectory(_ directory: String) throws(SocketFileError) {
        if mkdir(directory, 0o700) != 0, errno != EEXIST {
            throw SocketFileError(description: "cannot create \(directory) for the socket: \(String(cString: strerror(errno))); choose a --socket")
        }
        var status = stat()
        guard lstat(directory, &status) == 0, status.st_mode & S_IFMT == S_IFDIR, status.st_uid == getuid(),
              status.st_mode & 0o077 == 0 else {
            throw SocketFileError(description: "\(directory) is not a folder of this user's alone (mode 0700); remove it, or choose a --socket")
        }
    }

    /// The id of the group that should own the socket.
    static func groupID(_ group: String) throws(SocketFileError) -> gid_t {
        guard let entry = getgrnam(group) else {
            throw SocketFileError(description: "unknown group '\(group)' for the socket")
        }
        return entry.pointee.gr_gid
    }

    /// Sets mode and, if given, group; returns the file's inode for ``remove(_:inode:)``.
    static func applyPermissions(_ path: String, mode: mode_t, group: String?) throws(SocketFileError) -> ino_t {
        if let group {
            guard chown(path, uid_t.max, try groupID(group)) == 0 else {
                throw SocketFileError(description: "cannot give \(path) to group \(group): \(String(cString: strerror(errno)))")
            }
        }
        guard chmod(path, mode) == 0 else {
            throw SocketFileError(description: "cannot set mode of \(path): \(String(cString: strerror(errno)))")
        }
        var status = stat()
        guard stat(path, &status) == 0 else {
            throw SocketFileError(description: "cannot inspect \(path): \(String(cString: strerror(errno)))")
        }
        return status.st_ino
    }

    /// Removes the socket file if it is the one this process created.
    static func remove(_ path: String, inode: ino_t) {
        var status = stat()
        if lstat(path, &status) == 0, status.st_ino == inode {
            unlink(path)
        }
    }
}
