#if canImport(Glibc)
import Glibc
#endif

/// Reads an event log line by line, and follows it across rotations as `tail -F` does.
///
/// A line is handed out only once its newline is there, so a line being
/// written is never seen torn. When the path names a new file (rotation by
/// pgherald or logrotate), the old one is read to its end first, so no line
/// between the two is missed.
public final class EventLogReader {
    public let path: String
    private var descriptor: Int32 = -1
    private var inode: ino_t = 0
    private var partial: [UInt8] = []

    public init(path: String) {
        self.path = path
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    /// The rotated files of `path` that exist, oldest first (`path.5` … `path.1`).
    public static func rotatedGenerations(of path: String) -> [String] {
        var generations: [String] = []
        var generation = 1
        while access("\(path).\(generation)", F_OK) == 0 {
            generations.append("\(path).\(generation)")
            generation += 1
        }
        return generations.reversed()
    }

    /// Complete lines that have arrived since the last call; empty when there are none yet.
    /// - Throws: when the file cannot be opened or read.
    public func readAvailable() throws(EventLogError) -> [String] {
        if descriptor < 0 { try open() }
        var lines = try readToEnd()
        if lines.isEmpty, pathNamesAnotherFile() {
            // Rotated: finish the old file, then any generation rotated out since
            // (a large batch can rotate several times between two looks), then start on the new one.
            lines = try readToEnd()
            let finished = inode
            close(descriptor)
            descriptor = -1
            partial.removeAll()
            for generation in Self.generations(rotatedAfter: finished, of: path) {
                lines += try EventLogReader(path: generation).readAvailable()
            }
            if access(path, F_OK) == 0 {
                try open()
                lines += try readToEnd()
            }
        }
        return lines
    }

    /// The rotated files of `path` newer than the one whose inode is
    /// `inode`, oldest first; none when it is not among them (logrotate moved it elsewhere).
    static func generations(rotatedAfter inode: ino_t, of path: String) -> [String] {
        var generation = 1
        var status = stat()
        while stat("\(path).\(generation)", &status) == 0 {
            if status.st_ino == inode {
                return (1..<generation).reversed().map { "\(path).\($0)" }
            }
            generation += 1
        }
        return []
    }

    private func open() throws(EventLogError) {
        descriptor = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw EventLogError(description: "cannot open \(path): \(String(cString: strerror(errno)))") }
        var status = stat()
        fstat(descriptor, &status)
        inode = status.st_ino
    }

    private func pathNamesAnotherFile() -> Bool {
        var status = stat()
        guard stat(path, &status) == 0 else { return true }
        return status.st_ino != inode
    }

    private func readToEnd() throws(EventLogError) -> [String] {
        guard descriptor >= 0 else { return [] }
        var lines: [String] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw EventLogError(description: "cannot read \(path): \(String(cString: strerror(errno)))") }
            if count == 0 { break }
            var start = 0
            for index in 0..<count where buffer[index] == UInt8(ascii: "\n") {
                partial += buffer[start..<index]
                lines.append(String(decoding: partial, as: UTF8.self))
                partial.removeAll(keepingCapacity: true)
                start = index + 1
            }
            partial += buffer[start..<count]
        }
        return lines
    }
}
