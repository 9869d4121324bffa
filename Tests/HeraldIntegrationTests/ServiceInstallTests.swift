import Foundation
import Testing

extension IntegrationTests {
    /// The unit and its companions as scripts/install-service lays them down, checked with systemd's own tools.
    @Suite
    struct ServiceInstallTests {
        /// Runs a command to completion; returns its status and output (stdout and stderr together).
        func run(_ command: String, _ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [command] + arguments
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
            process.currentDirectoryURL = TestDatabase.repositoryRoot
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = pipe
            try process.run()
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (process.terminationStatus, output)
        }

        @Test func installServiceLaysDownAUnitThatSystemdAcceptsWithExposureAtMost1point5() async throws {
            let root = FileManager.default.temporaryDirectory.appending(path: "pgherald-root-\(UUID().uuidString.prefix(8))").path
            let installed = try run("scripts/install-service", ["--binary", DaemonProcess.executable.path], environment: ["DESTDIR": root])
            #expect(installed.status == 0, "\(installed.output)")
            for (file, mode) in [
                ("usr/local/bin/pgherald", 0o755), ("etc/systemd/system/pgherald.service", 0o644),
                ("usr/lib/sysusers.d/pgherald.conf", 0o644), ("etc/logrotate.d/pgherald", 0o644), ("etc/pgherald/pgherald.yaml", 0o640),
            ] {
                let attributes = try FileManager.default.attributesOfItem(atPath: "\(root)/\(file)")
                #expect((attributes[.posixPermissions] as? Int) == mode, "\(file)")
            }

            // verify needs the binary where ExecStart says; point it at the installed one.
            let unit = try String(contentsOfFile: "\(root)/etc/systemd/system/pgherald.service", encoding: .utf8)
            let checkable = "\(root)/pgherald.service"
            try unit.replacing("/usr/local/bin/pgherald", with: "\(root)/usr/local/bin/pgherald").write(toFile: checkable, atomically: true, encoding: .utf8)
            let verify = try run("systemd-analyze", ["verify", checkable])
            #expect(verify.status == 0 && verify.output.isEmpty, "\(verify.output)")

            let security = try run("systemd-analyze", ["security", "--offline=yes", checkable])
            let exposure = security.output.split(separator: "\n")
                .first { $0.contains("Overall exposure level") }
                .flatMap { line in line.split(separator: " ").compactMap { Double($0) }.first }
            let level = try #require(exposure, "\(security.output.suffix(300))")
            #expect(level <= 1.5, "exposure \(level)")
            for directive in ["Type=notify", "ExecReload=", "WatchdogSec=", "Restart=on-failure", "RuntimeDirectory=pgherald", "LogsDirectory=pgherald", "ConfigurationDirectory=pgherald"] {
                #expect(unit.contains(directive), "\(directive)")
            }

            let sysusers = try run("systemd-sysusers", ["--dry-run", "--root=\(root)"])
            #expect(sysusers.status == 0, "\(sysusers.output)")
            #expect(sysusers.output.contains("Creating group 'pgherald-clients'"))

            // The installed configuration is valid once the unit's directories and group exist
            // (the group stands in for the access rule's as for the socket's).
            let configFile = "\(root)/etc/pgherald/pgherald.yaml"
            try String(contentsOfFile: configFile, encoding: .utf8).replacing("group: pgherald-clients", with: "group: root")
                .write(toFile: configFile, atomically: true, encoding: .utf8)
            let check = try await DaemonProcess(["check-config", configFile], environment: [
                "PGHERALD_SOCKET_GROUP": "root", "PGHERALD_EVENT_LOG_PATH": "\(root)/events.jsonl",
            ]).finish()
            #expect(check.status == 0, "\(check.stderr)")
        }
    }
}
