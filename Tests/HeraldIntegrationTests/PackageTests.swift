import Foundation
import Herald
import Testing

extension IntegrationTests {
    /// The Debian package as an operator meets it: `dpkg -i` into a fresh Debian 12 root,
    /// the service under a booted systemd, an upgrade, a remove and a purge.
    /// scripts/package-test builds the package and the root, and runs this.
    @Suite(.enabled(if: DebianRoot.isAvailable, "scripts/package-test builds the package and a Debian 12 root (as root)"))
    struct PackageTests {
        /// The packages scripts/package made, and one of a lower version with the same
        /// contents, to upgrade from.
        struct Packages {
            let version: String
            let daemon: String
            let native: String
            let previous: String

            init(in directory: String, workspace: String) throws {
                let files = try FileManager.default.contentsOfDirectory(atPath: directory)
                let daemon = try #require(files.first { $0.hasPrefix("pgherald_") && $0.hasSuffix(".deb") }, "no pgherald_*.deb in \(directory)")
                let native = try #require(files.first { $0.hasPrefix("postgresql-15-pgherald_") && $0.hasSuffix(".deb") })
                self.daemon = "\(directory)/\(daemon)"
                self.native = "\(directory)/\(native)"
                version = try DebianRoot.run("/usr/bin/dpkg-deb", ["-f", self.daemon, "Version"]).output
                    .trimmingCharacters(in: .whitespacesAndNewlines)
                let unpacked = "\(workspace)/previous"
                try #require(DebianRoot.run("/usr/bin/dpkg-deb", ["-R", self.daemon, unpacked]).status == 0)
                let control = "\(unpacked)/DEBIAN/control"
                try String(contentsOfFile: control, encoding: .utf8)
                    .replacing("Version: \(version)\n", with: "Version: \(version)~previous\n")
                    .write(toFile: control, atomically: true, encoding: .utf8)
                previous = "\(workspace)/pgherald_\(version)~previous.deb"
                let built = try DebianRoot.run("/usr/bin/dpkg-deb", ["--root-owner-group", "-b", unpacked, previous])
                try #require(built.status == 0, "\(built.output)")
            }
        }

        @Test func installsEnabledButDownThenServesReloadsUpgradesWithoutLossAndPurgesCleanly() async throws {
            let root = try DebianRoot()
            defer { root.remove() }
            // Not under /tmp, which is a fresh tmpfs once the root boots.
            let workspace = root.path + "/srv/packages"
            try FileManager.default.createDirectory(atPath: workspace, withIntermediateDirectories: true)
            let packages = try Packages(in: try #require(DebianRoot.packages), workspace: workspace)
            try FileManager.default.copyItem(atPath: packages.daemon, toPath: "\(workspace)/current.deb")

            // Install the previous version: enabled, not started, and says what to do next.
            let installed = try root.run(["dpkg", "-i", "/srv/packages/pgherald_\(packages.version)~previous.deb"])
            #expect(installed.status == 0, "\(installed.output)")
            #expect(installed.output.contains("installed, enabled and not started"), "\(installed.output)")
            try checkInstalledFiles(root)

            // Unconfigured, the service cannot start: check-config accepts the file and says why.
            let check = try root.run(["pgherald", "check-config", "/etc/pgherald/pgherald.yaml"])
            #expect(check.status == 0, "\(check.output)")
            #expect(check.output.contains("names no database"), "\(check.output)")
            let unconfigured = try root.runAsDaemonUser(["pgherald", "serve", "--config", "/etc/pgherald/pgherald.yaml"])
            #expect(unconfigured.status == 78, "\(unconfigured.output)")

            // Point it at a database on the host's loopback, with its password in a file beside the configuration.
            let database = try TestDatabase.create()
            let role = "herald_package_\(database.name)"
            try database.execute("CREATE ROLE \(role) LOGIN SUPERUSER PASSWORD 'package-secret'")
            let port = try #require(try database.execute("SHOW port").rows.first?.first ?? nil)
            let shipped = try root.read("/etc/pgherald/pgherald.yaml")
            let line = #"# database: "host=/run/postgresql dbname=app user=pgherald""#
            try #require(shipped.contains(line))
            try root.write(
                shipped.replacing(line, with: """
                    # Set up by PackageTests.
                    database: "host=127.0.0.1 port=\(port) dbname=\(database.name) user=\(role)"
                    password_file: /etc/pgherald/db-password
                    """),
                to: "/etc/pgherald/pgherald.yaml"
            )
            try root.write("package-secret\n", to: "/etc/pgherald/db-password")
            try root.run(["chmod", "0640", "/etc/pgherald/db-password"])
            try root.run(["chgrp", "pgherald", "/etc/pgherald/db-password"])
            let connected = try root.run(["pgherald", "check-config", "--connect", "/etc/pgherald/pgherald.yaml"])
            #expect(connected.status == 0, "\(connected.output)")

            if let refusal = root.bootRefusal() {
                print("PackageTests: booting the root is skipped, and with it the service's start, reload and restart: \(refusal)")
                let upgraded = try root.run(["dpkg", "-i", "/srv/packages/current.deb"])
                #expect(upgraded.status == 0, "\(upgraded.output)")
                let removed = try root.run(["dpkg", "-r", "pgherald"])
                #expect(removed.status == 0, "\(removed.output)")
            } else {
                try await serveUnderSystemd(root, database: database)
            }

            // Removed: the binary is gone, the configuration stays until a purge.
            #expect(!root.exists("/usr/bin/pgherald"))
            #expect(try root.read("/etc/pgherald/pgherald.yaml").contains("# Set up by PackageTests."))
            let purged = try root.run(["dpkg", "--purge", "pgherald"])
            #expect(purged.status == 0, "\(purged.output)")
            for gone in ["/etc/pgherald", "/var/log/pgherald", "/lib/systemd/system/pgherald.service"] {
                #expect(!root.exists(gone), "\(gone) is left after the purge")
            }
            #expect(!root.isLink("/etc/systemd/system/multi-user.target.wants/pgherald.service"), "the unit is still enabled after the purge")
            let owned = try root.run(["find", "/", "-xdev", "(", "-user", "pgherald", "-o", "-group", "pgherald", ")", "-print"])
            #expect(owned.output.isEmpty, "files of pgherald's user left after the purge: \(owned.output)")
            #expect(try root.run(["dpkg-query", "-W", "pgherald"]).status != 0)

            // The database is never touched: its triggers and journal stay.
            let triggers = try database.execute("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'public.course'::regclass AND NOT tgisinternal")
            #expect(triggers.scalar.flatMap { Int($0) } ?? 0 > 0)
            #expect(try database.execute("SELECT count(*) FROM pgherald.journal").scalar != nil)

            try checkNativeTriggerPackage(packages.native, database: database)
        }

        /// Everything the package lays down, with its owner and mode, before anything has started.
        func checkInstalledFiles(_ root: DebianRoot) throws {
            for (file, ownership) in [
                ("/usr/bin/pgherald", "755 root root"),
                ("/lib/systemd/system/pgherald.service", "644 root root"),
                ("/usr/lib/sysusers.d/pgherald.conf", "644 root root"),
                ("/usr/lib/tmpfiles.d/pgherald.conf", "644 root root"),
                ("/etc/pgherald", "750 root pgherald"),
                ("/etc/pgherald/pgherald.yaml", "640 root pgherald"),
                ("/etc/logrotate.d/pgherald", "644 root root"),
                ("/var/log/pgherald", "750 pgherald pgherald"),
                ("/usr/share/man/man8/pgherald.8.gz", "644 root root"),
                ("/usr/share/man/man5/pgherald.yaml.5.gz", "644 root root"),
                ("/usr/share/bash-completion/completions/pgherald", "644 root root"),
                ("/usr/share/zsh/vendor-completions/_pgherald", "644 root root"),
                ("/usr/share/fish/vendor_completions.d/pgherald.fish", "644 root root"),
                ("/usr/share/pgherald/sql/install.sql", "644 root root"),
                ("/usr/share/doc/pgherald/copyright", "644 root root"),
                ("/usr/share/doc/pgherald/changelog.gz", "644 root root"),
            ] {
                #expect(try root.ownership(of: file) == ownership, "\(file)")
            }
            let unit = try root.read("/lib/systemd/system/pgherald.service")
            #expect(unit.contains("ExecStart=/usr/bin/pgherald serve --config /etc/pgherald/pgherald.yaml"))
            let shippedUnit = try String(contentsOf: TestDatabase.repositoryRoot.appending(path: "systemd/pgherald.service"), encoding: .utf8)
            #expect(unit == shippedUnit.replacing("/usr/local/bin/pgherald", with: "/usr/bin/pgherald"), "the packaged unit is not the repository's")
            #expect(root.isLink("/etc/systemd/system/multi-user.target.wants/pgherald.service"), "the unit is not enabled")
            let conffiles = try root.run(["dpkg-query", "-W", "-f", "${Conffiles}", "pgherald"]).output
            #expect(conffiles.contains("/etc/pgherald/pgherald.yaml") && conffiles.contains("/etc/logrotate.d/pgherald"), "\(conffiles)")

            #expect(try root.run(["getent", "passwd", "pgherald"]).output.hasSuffix(":/usr/sbin/nologin\n"))
            #expect(try root.run(["getent", "group", "pgherald-clients"]).output.contains(":pgherald"))

            // No Swift toolchain in the root: every library the binary needs is there.
            let libraries = try root.run(["ldd", "/usr/bin/pgherald"]).output
            #expect(!libraries.contains("not found") && !libraries.contains("libswift"), "\(libraries)")
            let version = try root.run(["pgherald", "--version"]).output.trimmingCharacters(in: .whitespacesAndNewlines)
            let packaged = try root.run(["dpkg-query", "-W", "-f", "${Version}", "pgherald"]).output
            #expect(packaged.hasPrefix(version) && !version.isEmpty, "pgherald --version says \(version), the package \(packaged)")

            // The manual pages render, and the completions parse.
            for page in ["/usr/share/man/man8/pgherald.8.gz", "/usr/share/man/man5/pgherald.yaml.5.gz"] {
                let rendered = try DebianRoot.run("/usr/bin/man", ["--local-file", root.path + page])
                #expect(rendered.status == 0 && rendered.output.contains("pgherald"), "\(page): \(rendered.output.prefix(300))")
            }
            #expect(try root.run(["bash", "-n", "/usr/share/bash-completion/completions/pgherald"]).status == 0)
        }

        /// The service under systemd in the booted root: a driver unit inside runs each step
        /// when the test asks, and the test writes rows and reads the event log from outside.
        func serveUnderSystemd(_ root: DebianRoot, database: TestDatabase) async throws {
            try root.write(Self.driver, to: "/usr/local/sbin/pgherald-package-driver")
            try root.run(["chmod", "0755", "/usr/local/sbin/pgherald-package-driver"])
            try root.write(Self.driverUnit, to: "/etc/systemd/system/pgherald-package-driver.service")
            try root.run(["ln", "-s", "/etc/systemd/system/pgherald-package-driver.service", "/etc/systemd/system/multi-user.target.wants/"])
            try FileManager.default.createDirectory(atPath: root.path + "/check", withIntermediateDirectories: true)
            let steps = Steps(root: root)
            let machine = try root.boot(log: root.path + "/check/console.log")
            defer {
                machine.stop(grace: .seconds(10))
                try? root.mountProc()
            }
            let eventLog = EventLogWatch(path: root.path + "/var/log/pgherald/events.jsonl")

            // Started by systemctl, which returns once the daemon says READY=1.
            let started = try await steps.wait(for: "start")
            #expect(started.status == 0, "\((try? steps.console()) ?? "")")
            #expect(started.state == "active")
            try insertCourses(database, ["A"])
            try await eventLog.wait(for: "A")

            // A reload keeps the process.
            try steps.go("reload")
            let reloaded = try await steps.wait(for: "reload")
            #expect(reloaded.status == 0 && reloaded.state == "active")
            #expect(reloaded.mainPID == started.mainPID, "the reload restarted the daemon")

            // An upgrade restarts the running service, which resumes from its cursor.
            try insertCourses(database, ["B"])
            try steps.go("upgrade")
            let upgraded = try await steps.wait(for: "upgrade")
            #expect(upgraded.status == 0, "\((try? root.read("/check/upgrade.log")) ?? "")")
            #expect(upgraded.state == "active")
            #expect(upgraded.mainPID != started.mainPID, "the upgrade did not restart the service")
            try insertCourses(database, ["C"])
            try await eventLog.wait(for: "B", "C")
            let configuration = try root.read("/etc/pgherald/pgherald.yaml")
            #expect(configuration.contains("# Set up by PackageTests."), "the upgrade replaced the edited configuration")
            #expect(!root.exists("/etc/pgherald/pgherald.yaml.dpkg-new") && !root.exists("/etc/pgherald/pgherald.yaml.dpkg-dist"))

            // Stopped, it misses nothing written meanwhile.
            try steps.go("stop")
            let stopped = try await steps.wait(for: "stop")
            #expect(stopped.status == 0 && stopped.state == "inactive")
            try insertCourses(database, ["D"])
            try steps.go("start")
            let restarted = try await steps.wait(for: "start", occurrence: 2)
            #expect(restarted.status == 0 && restarted.state == "active")
            try await eventLog.wait(for: "D")
            #expect(try eventLog.codes() == ["A", "B", "C", "D"], "each change once, in order")

            // Removing the package stops the service.
            try steps.go("remove")
            let removed = try await steps.wait(for: "remove")
            #expect(removed.status == 0, "\((try? root.read("/check/remove.log")) ?? "")")
            #expect(removed.state == "inactive")
            try await waitFor(seconds: 60) { !machine.isRunning } failure: { "the root did not power off" }
        }

        func insertCourses(_ database: TestDatabase, _ codes: [String]) throws {
            for code in codes {
                try database.execute("INSERT INTO course (short_code, name) VALUES ($1, $2)", parameters: [code, "Course \(code)"])
            }
        }

        /// The native triggers' package: PostgreSQL 15's library, which that server loads.
        func checkNativeTriggerPackage(_ package: String, database: TestDatabase) throws {
            let depends = try DebianRoot.run("/usr/bin/dpkg-deb", ["-f", package, "Depends"]).output
            #expect(depends.contains("postgresql-15"), "\(depends)")
            let contents = try DebianRoot.run("/usr/bin/dpkg-deb", ["-c", package]).output
            #expect(contents.contains("./usr/lib/postgresql/15/lib/pgherald.so"), "\(contents)")
            guard try database.execute("SHOW server_version_num").scalar?.hasPrefix("15") == true else { return }
            let unpacked = FileManager.default.temporaryDirectory.appending(path: "pgherald-native-\(UUID().uuidString.prefix(8))").path
            defer { try? FileManager.default.removeItem(atPath: unpacked) }
            try #require(DebianRoot.run("/usr/bin/dpkg-deb", ["-x", package, unpacked]).status == 0)
            chmod(unpacked, 0o755)
            try database.execute("LOAD '\(unpacked)/usr/lib/postgresql/15/lib/pgherald.so'")
        }

        /// What the driver unit inside the root reports, one line per step: its name, systemctl's
        /// status, then the unit's ActiveState and MainPID.
        struct Steps {
            struct Step {
                var status: Int32
                var state: String
                var mainPID: String
            }

            let root: DebianRoot

            func go(_ step: String) throws {
                try root.write("", to: "/check/go-\(step)")
            }

            func wait(for step: String, occurrence: Int = 1, within seconds: Double = 90) async throws -> Step {
                var found: Step?
                try await waitFor(seconds: seconds) {
                    let lines = ((try? root.read("/check/steps")) ?? "").split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
                    let matching = lines.filter { $0.first == step && $0.count == 4 }
                    guard matching.count >= occurrence else { return false }
                    let fields = matching[occurrence - 1]
                    found = Step(status: Int32(fields[1]) ?? -1, state: fields[2], mainPID: fields[3])
                    return true
                } failure: {
                    "step \(step) did not come: steps \((try? root.read("/check/steps")) ?? "none"); \((try? console()) ?? "")"
                }
                return try #require(found)
            }

            func console() throws -> String {
                String(try root.read("/check/console.log").suffix(3000))
            }
        }

        /// The event log as an operator tails it.
        struct EventLogWatch {
            let path: String

            func codes() throws -> [String] {
                let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
                return text.split(separator: "\n").compactMap { try? Event(payload: String($0)) }.compactMap { $0.row?["short_code"]?.stringValue }
            }

            func wait(for codes: String...) async throws {
                try await waitFor(seconds: 30) {
                    let seen = try self.codes()
                    return codes.allSatisfy(seen.contains)
                } failure: { "\(codes) not in the event log: \((try? self.codes()) ?? [])" }
            }
        }

        static let driverUnit = """
            [Unit]
            Description=pgherald's package test, run inside the booted root
            After=multi-user.target

            [Service]
            Type=oneshot
            ExecStart=/usr/local/sbin/pgherald-package-driver

            [Install]
            WantedBy=multi-user.target

            """

        /// Each step waits for the test's go-STEP file (bounded), acts, and reports.
        /// The root powers off at the end, or at the first step that never comes.
        static let driver = """
            #!/bin/sh
            report() { echo "$1 $2 $(systemctl show -P ActiveState pgherald) $(systemctl show -P MainPID pgherald)" >> /check/steps; }
            await() {
                i=0
                while [ ! -e "/check/go-$1" ]; do
                    i=$((i + 1)); [ $i -gt 900 ] && { echo "timeout $1 - -" >> /check/steps; systemctl poweroff --no-block; exit 1; }
                    sleep 0.1
                done
            }
            systemctl start pgherald; report start $?
            await reload; systemctl reload pgherald; status=$?; sleep 1; report reload $status
            await upgrade; dpkg -i /srv/packages/current.deb > /check/upgrade.log 2>&1; report upgrade $?
            await stop; systemctl stop pgherald; report stop $?
            await start; systemctl start pgherald; report start $?
            await remove; dpkg -r pgherald > /check/remove.log 2>&1; report remove $?
            journalctl --no-pager -u pgherald > /check/journal.log 2>&1
            systemctl poweroff --no-block

            """
    }
}
