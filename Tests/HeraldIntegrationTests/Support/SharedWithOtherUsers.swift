import Foundation
import Synchronization

/// Files that tests run as another user (a peer on the socket, the daemon as
/// nobody), copied where that user can read them: the checkout may be
/// private, as a clone in root's home is, and another uid then cannot even
/// open a script in it.
enum SharedWithOtherUsers {
    private static let copies = Mutex<[String: String]>([:])

    /// A folder of this test process's own, in the one `scripts/test` made for this
    /// (`PGHERALD_TEST_SHARED`), which both halves of the suite share, or in the temporary directory.
    private static let directory: String = {
        let parent = ProcessInfo.processInfo.environment["PGHERALD_TEST_SHARED"] ?? NSTemporaryDirectory()
        var template = Array("\(parent)/pgherald-shared.XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "cannot make a temporary folder: \(String(cString: strerror(errno)))")
        let path = String(cString: made!)
        chmod(path, 0o755)
        return path
    }()

    /// A copy of `file` that every user may read (and run, if it is executable), made once per test run.
    static func path(of file: URL) throws -> String {
        try copies.withLock { copies in
            if let copy = copies[file.path] { return copy }
            let folder = "\(directory)/\(copies.count)"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
            let copy = "\(folder)/\(file.lastPathComponent)"
            try FileManager.default.copyItem(atPath: file.path, toPath: copy)
            let executable = access(file.path, X_OK) == 0
            chmod(copy, executable ? 0o755 : 0o644)
            copies[file.path] = copy
            return copy
        }
    }
}
