import Foundation
import Testing

/// A fresh Debian 12 root, unpacked from the debootstrap tarball that
/// scripts/package-test makes, in which packages are installed with dpkg as on
/// a real machine: commands run under chroot with /proc mounted, and the root
/// can be booted with systemd-nspawn.
final class DebianRoot: Sendable {
    /// The tarball and the packages, from scripts/package-test.
    static let tarball = ProcessInfo.processInfo.environment["PGHERALD_TEST_DEBIAN_ROOT"]
    static let packages = ProcessInfo.processInfo.environment["PGHERALD_TEST_PACKAGE_DIR"]
    static var isAvailable: Bool { tarball != nil && packages != nil && getuid() == 0 }

    let path: String

    init() throws {
        let tarball = try #require(Self.tarball, "PGHERALD_TEST_DEBIAN_ROOT is not set; run scripts/package-test")
        path = FileManager.default.temporaryDirectory.appending(path: "pgherald-debian-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let unpacked = try Self.run("/usr/bin/tar", ["-xf", tarball, "-C", path])
        try #require(unpacked.status == 0, "\(unpacked.output)")
        try mountProc()
    }

    /// Unmounts /proc and removes the root.
    func remove() {
        unmountProc()
        try? FileManager.default.removeItem(atPath: path)
    }

    /// A command run inside the root as root; status and output (stdout and stderr together).
    @discardableResult
    func run(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
        try Self.run("/usr/sbin/chroot", [path, "/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"]
            + environment.map { "\($0.key)=\($0.value)" } + arguments)
    }

    /// The same as the daemon's user, with its supplementary groups, as the unit runs it.
    func runAsDaemonUser(_ arguments: [String]) throws -> (status: Int32, output: String) {
        try run(["setpriv", "--reuid=pgherald", "--regid=pgherald", "--init-groups"] + arguments)
    }

    /// `stat` of a path in the root: octal mode, owner and group, such as `640 root pgherald`.
    func ownership(of file: String) throws -> String {
        try run(["stat", "-c", "%a %U %G", file]).output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func exists(_ file: String) -> Bool {
        FileManager.default.fileExists(atPath: path + file)
    }

    /// Whether a symbolic link is there, whatever it points to: an absolute
    /// target means a path in the root, not on the host.
    func isLink(_ file: String) -> Bool {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: path + file)) != nil
    }

    func read(_ file: String) throws -> String {
        try String(contentsOfFile: path + file, encoding: .utf8)
    }

    func write(_ text: String, to file: String) throws {
        try FileManager.default.createDirectory(
            atPath: (path + file as NSString).deletingLastPathComponent, withIntermediateDirectories: true
        )
        try text.write(toFile: path + file, atomically: true, encoding: .utf8)
    }

    /// Whether systemd-nspawn can boot a root here; the reason when it cannot.
    func bootRefusal() -> String? {
        unmountProc()
        defer { try? mountProc() }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-nspawn") else { return "systemd-nspawn is not installed" }
        guard let probe = try? Self.run("/usr/bin/systemd-nspawn", Self.nspawnOptions + ["-D", path, "/bin/true"]) else {
            return "systemd-nspawn did not run"
        }
        return probe.status == 0 ? nil : "systemd-nspawn cannot run a container here: \(probe.output.prefix(300))"
    }

    /// Boots the root with systemd as its init; the process ends when the root powers off.
    func boot(log: String) throws -> Process {
        unmountProc()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/systemd-nspawn")
        // The host's network: the root reaches the test's PostgreSQL on 127.0.0.1.
        process.arguments = Self.nspawnOptions + ["-D", path, "--boot"]
        FileManager.default.createFile(atPath: log, contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// Not registered with a host machined, which a test machine need not run.
    private static let nspawnOptions = ["--register=no", "--keep-unit", "--quiet"]

    func mountProc() throws {
        let mounted = try Self.run("/usr/bin/mount", ["-t", "proc", "proc", path + "/proc"])
        try #require(mounted.status == 0, "\(mounted.output)")
    }

    func unmountProc() {
        _ = try? Self.run("/usr/bin/umount", [path + "/proc"])
    }

    static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }
}
