#if canImport(Glibc)
import Glibc
#endif

/// Why the event log could not take a batch.
public struct EventLogError: Error, Hashable, CustomStringConvertible {
    public var description: String
}

/// The event log's file: appends whole lines, rotates by size, syncs, and reopens.
///
/// Used from one queue only. A batch that cannot be written completely (a
/// full disk) is cut back to where it started, so the file never ends in a
/// torn line; rotation happens between lines, so none is split across files.
final class EventLogFile {
    private(set) var configuration: EventLogConfiguration
    private var descriptor: Int32 = -1
    private(set) var size: Int64 = 0
    private var unsyncedSince: ContinuousClock.Instant?
    private(set) var rotations = 0

    init(configuration: EventLogConfiguration) throws(EventLogError) {
        self.configuration = configuration
        try open()
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    /// Appends `lines` (each ending in a newline) in order, rotating first whenever the next line would pass the size limit.
    func append(_ lines: [[UInt8]]) throws(EventLogError) {
        var pending: [UInt8] = []
        var pendingSize: Int64 = 0
        for line in lines {
            if let limit = configuration.maximumSize, size + pendingSize > 0, size + pendingSize + Int64(line.count) > limit {
                try write(pending)
                pending.removeAll(keepingCapacity: true)
                pendingSize = 0
                try rotate()
            }
            pending += line
            pendingSize += Int64(line.count)
        }
        try write(pending)
        switch configuration.sync {
        case .every: try sync()
        case .interval: try syncIfDue()
        case .none: break
        }
    }

    /// Forces written lines to disk if the interval has passed since the first unsynced write.
    func syncIfDue() throws(EventLogError) {
        guard let since = unsyncedSince, ContinuousClock.now - since >= configuration.syncInterval else { return }
        try sync()
    }

    func sync() throws(EventLogError) {
        guard unsyncedSince != nil else { return }
        guard fsync(descriptor) == 0 else { throw failure("cannot sync") }
        unsyncedSince = nil
    }

    /// Closes and opens the path again: after logrotate moved the file away, or when the path changed.
    func reopen(with configuration: EventLogConfiguration? = nil) throws(EventLogError) {
        try? sync()
        close(descriptor)
        descriptor = -1
        if let configuration { self.configuration = configuration }
        try open()
    }

    private func open() throws(EventLogError) {
        descriptor = Glibc.open(configuration.path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o640)
        guard descriptor >= 0 else { throw failure("cannot open") }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw failure("cannot inspect") }
        size = Int64(status.st_size)
        try cutTornTail()
    }

    /// A daemon killed in the middle of a write can leave a line without its newline; the
    /// next line appended after it was glued to it, and readers lost that one too. The
    /// torn line was never synced, so its event is written again from the checkpoint.
    private func cutTornTail() throws(EventLogError) {
        guard size > 0 else { return }
        let reader = Glibc.open(configuration.path, O_RDONLY | O_CLOEXEC)
        guard reader >= 0 else { throw failure("cannot read") }
        defer { close(reader) }
        var chunk = [UInt8](repeating: 0, count: 4096)
        var end = size
        while end > 0 {
            let start = max(0, end - Int64(chunk.count))
            let count = chunk.withUnsafeMutableBytes { pread(reader, $0.baseAddress!, Int(end - start), off_t(start)) }
            guard count == Int(end - start) else { throw failure("cannot read") }
            if let last = chunk[..<count].lastIndex(of: UInt8(ascii: "\n")) {
                end = start + Int64(last) + 1
                break
            }
            end = start
        }
        guard end < size else { return }
        guard ftruncate(descriptor, off_t(end)) == 0 else { throw failure("cannot cut the torn last line of") }
        size = end
    }

    private func write(_ bytes: [UInt8]) throws(EventLogError) {
        guard !bytes.isEmpty else { return }
        let start = size
        let failed: Int32? = bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return written < 0 ? errno : ENOSPC }
                offset += written
            }
            return nil
        }
        if let failed {
            // Cut back to the last whole line, so the next write starts on a fresh one.
            _ = ftruncate(descriptor, off_t(start))
            throw EventLogError(description: "cannot write \(configuration.path): \(String(cString: strerror(failed)))")
        }
        size += Int64(bytes.count)
        if unsyncedSince == nil { unsyncedSince = .now }
    }

    /// `path` → `path.1` → … → `path.keep`; the oldest is removed.
    private func rotate() throws(EventLogError) {
        try sync()
        let path = configuration.path
        unlink("\(path).\(configuration.keep)")
        for generation in stride(from: configuration.keep - 1, through: 1, by: -1) {
            rename("\(path).\(generation)", "\(path).\(generation + 1)")
        }
        // Gone already means logrotate moved it and the SIGHUP is on its way: start the new file now.
        guard rename(path, "\(path).1") == 0 || errno == ENOENT else { throw failure("cannot rotate") }
        rotations += 1
        try reopen()
    }

    private func failure(_ action: String) -> EventLogError {
        EventLogError(description: "\(action) \(configuration.path): \(String(cString: strerror(errno)))")
    }
}
