import Foundation
import Synchronization

/// Runs the built `pgherald` executable; the process is terminated when the
/// last copy of this value goes away, so no test leaves a daemon behind.
struct DaemonProcess {
    static var executable: URL {
        if let path = ProcessInfo.processInfo.environment["PGHERALD_BINARY"] { return URL(fileURLWithPath: path) }
        // The test bundle sits next to the package's executables in the build directory.
        return URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appending(path: "pgherald")
    }

    let process = Process()
    let stdout = Pipe()
    let stderr = Pipe()
    /// The process's standard input, when asked for; otherwise it inherits the test's.
    let stdin: Pipe?
    private let reaper: Reaper
    /// Standard error, read from the start to its end: a process that logs
    /// more than a pipe holds (64 KiB) would otherwise block in `write(2)`,
    /// event loops and all, and look hung to the test.
    private let standardError: Task<String, Never>
    /// What ``readLine(within:where:)`` read past the line it returned.
    private let unread = UnreadOutput()

    /// Shared by the copies of a ``DaemonProcess``, as its pipe is.
    private final class UnreadOutput: Sendable {
        let bytes = Mutex(Data())
    }

    /// `environment` adds to the test's own, less the variables named in `removing`.
    init(
        _ arguments: [String], environment: [String: String] = [:], removing: Set<String> = [], executable: URL = Self.executable, withInput: Bool = false
    ) throws {
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }.filter { !removing.contains($0.key) }
        process.standardOutput = stdout
        process.standardError = stderr
        stdin = withInput ? Pipe() : nil
        if let stdin { process.standardInput = stdin }
        try process.run()
        reaper = Reaper(process: process)
        standardError = Self.readAll(stderr)
    }

    /// Terminates the process, if it still runs, when the test is done with it.
    private final class Reaper: Sendable {
        let process: Process

        init(process: Process) {
            self.process = process
        }

        deinit {
            process.stop()
        }
    }

    /// Waits for exit (killing the process after `seconds`) and returns status and output.
    func finish(within seconds: Double = 20) async throws -> (status: Int32, stdout: String, stderr: String) {
        let deadline = ContinuousClock.now + .seconds(seconds)
        // Read while waiting, so a chatty process cannot fill the pipe and stall.
        let out = Self.readAll(stdout)
        while process.isRunning {
            if ContinuousClock.now > deadline { process.stop() }
            try await Task.sleep(for: .milliseconds(20))
        }
        return (process.terminationStatus, await out.value, await standardError.value)
    }

    /// Everything the process writes to standard error, once it has ended.
    var standardErrorText: Task<String, Never> { standardError }

    /// Writes a line to the process's standard input (see `withInput`).
    func write(line: String) {
        stdin?.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    func signal(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Reads stdout line by line until one satisfies `predicate`; the lines
    /// after it that came in the same read are kept for the next call.
    /// After `seconds` the process is terminated, which ends the read with an error.
    func readLine(within seconds: Double = 10, where predicate: @escaping @Sendable (String) -> Bool) async throws -> String {
        let handle = stdout.fileHandleForReading
        let process = self.process
        let unread = self.unread
        let watchdog = Task {
            try await Task.sleep(for: .seconds(seconds))
            process.stop()
        }
        defer { watchdog.cancel() }
        let line = await Task.detached { () -> String? in
            var buffer = unread.bytes.withLock { $0 }
            defer { unread.bytes.withLock { [buffer] in $0 = buffer } }
            while true {
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                    buffer.removeSubrange(buffer.startIndex...newline)
                    if predicate(line) { return line }
                }
                let chunk = handle.availableData
                if chunk.isEmpty { return nil }
                buffer.append(chunk)
            }
        }.value
        guard let line else { throw ProcessTimeout(description: "no matching stdout line within \(seconds) s") }
        return line
    }

    /// Reads on a thread of its own: a blocking read on the concurrency pool's
    /// two threads would stall everything else in the test process, such as
    /// an HTTP receiver the command is talking to, and a daemon's standard
    /// error is read for as long as it runs, which would hold one of Dispatch's.
    private static func readAll(_ pipe: Pipe) -> Task<String, Never> {
        let handle = pipe.fileHandleForReading
        return Task {
            await withCheckedContinuation { continuation in
                Thread.detachNewThread {
                    continuation.resume(returning: String(decoding: handle.readDataToEndOfFile(), as: UTF8.self))
                }
            }
        }
    }
}

struct ProcessTimeout: Error, CustomStringConvertible {
    var description: String
}

extension Process {
    /// SIGTERM, then SIGKILL if the process is still running after `grace`:
    /// a child can inherit a signal mask that blocks SIGTERM from the test
    /// process's thread, and a deadline must end it all the same.
    func stop(grace: Duration = .seconds(3)) {
        guard isRunning else { return }
        terminate()
        let deadline = ContinuousClock.now + grace
        while isRunning, ContinuousClock.now < deadline { usleep(20_000) }
        if isRunning { kill(processIdentifier, SIGKILL) }
        waitUntilExit()
    }
}
