import Foundation
import Testing

extension IntegrationTests {
    /// README.md's first run against a database, run as its commands are written: install, serve,
    /// status, tail in a second shell started elsewhere, and curl on the socket path it names. As root
    /// without `XDG_RUNTIME_DIR` (a root shell often has none), and as an ordinary user with and
    /// without it, every command finds the one socket, and the followers see a row written.
    @Suite
    struct QuickStartTests {
        /// The commands of the README's first two `sh` blocks after `heading`.
        static func readmeCommands(after heading: String = "## A first run against your database") throws -> [String] {
            let readme = try String(contentsOf: TestDatabase.repositoryRoot.appending(path: "README.md"), encoding: .utf8)
            let section = try #require(readme.range(of: heading).map { readme[$0.upperBound...] }, "README.md has no \(heading)")
            let blocks = section.components(separatedBy: "```sh\n").dropFirst().prefix(2).map { $0.components(separatedBy: "```")[0] }
            return blocks.flatMap { $0.split(separator: "\n").map(String.init) }
        }

        /// A bash script that runs `commands` with the test's binary and database in place of the
        /// README's, the long-running ones in the background, then writes a row and waits for it.
        static func script(_ commands: [String], binary: String, database: String, marker: String) throws -> String {
            var lines = [
                "set -u",
                "command -v jq >/dev/null || jq() { cat; }",
                "pids=()",
                "trap 'kill \"${pids[@]}\" 2>/dev/null' EXIT",
            ]
            for command in commands where !command.hasPrefix("swift build") && !command.trimmingCharacters(in: .whitespaces).isEmpty {
                // The README's comments end its lines; here, redirections follow.
                let line = command.replacing(/\s+#\s.*$/, with: "")
                    .replacingOccurrences(of: ".build/release/pgherald", with: "'\(binary)'")
                    .replacingOccurrences(of: "\"host=/run/postgresql dbname=app\"", with: "'\(database)'")
                let words = line.split(separator: " ")
                if words.contains("serve") {
                    lines += ["(\(line)) > serve.out 2>&1 &", "pids+=($!)"]
                    // What the README's status line finds once serve listens.
                    lines += ["for _ in $(seq 100); do '\(binary)' status >/dev/null 2>&1 && break; sleep 0.2; done"]
                } else if words.contains("tail") {
                    // The second terminal: another directory, the same rule for the socket.
                    lines += ["(cd / && \(line)) > tail.out 2>&1 &", "pids+=($!)"]
                } else if line.contains("curl -N") {
                    lines += ["(\(line)) >> curl.out 2>&1 &", "pids+=($!)"]
                } else {
                    lines += ["\(line) >> commands.out 2>&1 || { echo \"failed: \(line.replacingOccurrences(of: "\"", with: "\\\""))\"; cat commands.out serve.out; exit 1; }"]
                }
            }
            lines += [
                "'\(binary)' status >> commands.out 2>&1 || { echo 'status failed'; cat commands.out serve.out; exit 1; }",
                "sleep 1",
                "psql '\(database)' -qc \"INSERT INTO course (short_code, name) VALUES ('\(marker)', 'quick start')\" || exit 1",
                "for _ in $(seq 100); do grep -q \(marker) tail.out && [ \"$(grep -c \(marker) curl.out)\" -ge 1 ] && break; sleep 0.2; done",
                "for part in tail curl commands serve; do echo \"\(sectionMark)$part\"; cat $part.out; done",
            ]
            return lines.joined(separator: "\n") + "\n"
        }

        /// Starts each output's part of the script's report: curl's progress meter, interleaved from
        /// two transfers, can print "--- " itself.
        static let sectionMark = "\n=== quickstart: "

        struct Runner: CustomTestStringConvertible, Sendable {
            var userID: UInt32
            var runtimeDirectory: Bool
            var testDescription: String { "uid \(userID), \(runtimeDirectory ? "with" : "without") XDG_RUNTIME_DIR" }
        }

        static let runners: [Runner] = getuid() == 0
            ? [Runner(userID: 0, runtimeDirectory: false), Runner(userID: 65534, runtimeDirectory: false), Runner(userID: 65534, runtimeDirectory: true)]
            : [Runner(userID: getuid(), runtimeDirectory: false)]

        @Test(arguments: runners)
        func theReadmesFirstRunWorksAsWritten(_ runner: Runner) async throws {
            let database = try TestDatabase.create()
            let commands = try Self.readmeCommands()
            #expect(commands.contains { $0.contains("pgherald serve") } && commands.contains { $0.contains("curl -N") }, "\(commands)")
            let binary = runner.userID == getuid() ? DaemonProcess.executable.path : try SharedWithOtherUsers.path(of: DaemonProcess.executable)
            let marker = "QS\(UInt16.random(in: 1000...9999))"
            let work = FileManager.default.temporaryDirectory.appending(path: "pgherald-quickstart-\(UUID().uuidString.prefix(8))").path
            let runtime = "\(work)-runtime"
            for folder in [work] + (runner.runtimeDirectory ? [runtime] : []) {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                chown(folder, runner.userID, runner.userID)
            }
            defer { for folder in [work, runtime] { try? FileManager.default.removeItem(atPath: folder) } }
            let script = "\(work)/quickstart.sh"
            try Self.script(commands, binary: binary, database: database.connInfo, marker: marker).write(toFile: script, atomically: true, encoding: .utf8)
            chown(script, runner.userID, runner.userID)

            var environment = ["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=\(work)", "LANG=C.UTF-8"]
            if runner.runtimeDirectory { environment.append("XDG_RUNTIME_DIR=\(runtime)") }
            let shell = ["/usr/bin/env", "-i"] + environment + ["bash", "-c", "cd '\(work)' && exec bash quickstart.sh"]
            let process = runner.userID == getuid()
                ? try DaemonProcess(Array(shell.dropFirst()), executable: URL(fileURLWithPath: shell[0]))
                : try DaemonProcess(
                    ["--reuid=\(runner.userID)", "--regid=\(runner.userID)", "--clear-groups", "--"] + shell, executable: URL(fileURLWithPath: "/usr/bin/setpriv")
                )
            let result = try await process.finish(within: 60)
            let output = result.stdout + result.stderr
            let sections = output.components(separatedBy: Self.sectionMark)
            let tail = sections.first { $0.hasPrefix("tail") } ?? ""
            let curl = sections.first { $0.hasPrefix("curl") } ?? ""
            #expect(result.status == 0, "\(output)")
            #expect(tail.contains(marker), "pgherald tail, run from /, saw no row: \(output)")
            #expect(curl.contains(marker), "curl on the README's socket path saw no row: \(output)")
            #expect(!output.contains("cannot reach pgherald"), "\(output)")
        }
    }
}
