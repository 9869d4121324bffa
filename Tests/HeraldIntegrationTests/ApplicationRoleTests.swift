import Foundation
import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// Applications connect as roles that may write their tables and no
    /// more. They need no grant for pgherald, cannot read or forge its
    /// events, and a role that may not read a table learns nothing of its
    /// changes from NOTIFY.
    @Suite
    struct ApplicationRoleTests {
        /// A role and a connection as it.
        private func role(in database: TestDatabase, grants: String) throws -> (name: String, connection: LibpqConnection) {
            let name = "role_\(UInt32.random(in: 0...UInt32.max))"
            try database.execute("CREATE ROLE \(name) LOGIN; \(grants.replacingOccurrences(of: "ROLE", with: name))")
            return (name, try LibpqConnection.connect(ConnectionString("\(database.connInfo) user=\(name)")))
        }

        /// An application role cannot install or uninstall pgherald: the refusal says who can.
        @Test func installAndUninstallByARoleThatOwnsNothingSayWhoMustRunThem() async throws {
            let database = try TestDatabase.create(install: false)
            let (name, _) = try role(in: database, grants: "GRANT SELECT ON course TO ROLE")
            let install = try await DaemonProcess(["install", "--db", "\(database.connInfo) user=\(name)"]).finish(within: 30)
            #expect(install.status != 0)
            #expect(install.stderr.contains("permission denied"), "\(install.stderr)")
            #expect(install.stderr.contains("must be run by the database's owner"), "\(install.stderr)")

            try Installer.install(on: database.connect())
            let uninstall = try await DaemonProcess(["uninstall", "--db", "\(database.connInfo) user=\(name)"]).finish(within: 30)
            #expect(uninstall.status != 0)
            #expect(uninstall.stderr.contains("must be run by the role that installed pgherald"), "\(uninstall.stderr)")
        }

        /// As README.md says: the database's owner installs with `--daemon-role`, and serve runs as that
        /// role. Before the grant, check-config --connect and serve say what to run; after it, both
        /// work, and a later install keeps the grant.
        @Test func aDaemonRoleThatInstallGrantsServesAndCheckConfigSaysSo() async throws {
            let database = try TestDatabase.create(enrolment: false, install: false)
            let (owner, daemonRole) = ("\(database.name)_owner", "\(database.name)_daemon")
            try database.execute("""
                CREATE ROLE \(owner) LOGIN NOSUPERUSER; ALTER DATABASE \(database.name) OWNER TO \(owner);
                ALTER SCHEMA public OWNER TO \(owner); CREATE ROLE \(daemonRole) LOGIN NOSUPERUSER
                """)
            let asOwner = "\(database.connInfo) user=\(owner)"
            let asDaemon = "\(database.connInfo) user=\(daemonRole)"
            try LibpqConnection.connect(ConnectionString(asOwner))
                .execute(String(contentsOf: TestDatabase.repositoryRoot.appending(path: "sql/examples/enrolment.sql"), encoding: .utf8))
            func checkConfig() async throws -> (status: Int32, stdout: String, stderr: String) {
                try await DaemonProcess(["check-config", "--connect", "/dev/null"], environment: ["PGHERALD_DATABASE": asDaemon]).finish(within: 30)
            }

            let notInstalled = try await checkConfig()
            #expect(notInstalled.status == 78 && notInstalled.stderr.contains("pgherald is not installed in this database"), "\(notInstalled.stderr)")
            let plain = try await DaemonProcess(["install", "--triggers", "plpgsql", "--db", asOwner]).finish(within: 30)
            #expect(plain.status == 0, "\(plain.stderr)")
            // Not a superuser: the warning says what to run after creating tables.
            #expect(plain.stderr.contains("not watched automatically: Run SELECT pgherald.attach_all() after creating tables"), "\(plain.stderr)")
            let refused = try await checkConfig()
            #expect(refused.status == 78, "\(refused.stdout)\(refused.stderr)")
            #expect(refused.stderr.contains(
                "database role \(daemonRole) lacks what serve needs in the pgherald schema (USAGE ON SCHEMA pgherald and "
            ), "\(refused.stderr)")
            #expect(refused.stderr.contains("run pgherald install --daemon-role \(daemonRole) as \(owner)"), "\(refused.stderr)")

            let missingRole = try await DaemonProcess(["install", "--db", asOwner, "--daemon-role", "\(daemonRole)_missing"]).finish(within: 30)
            #expect(missingRole.status != 0 && missingRole.stderr.contains("no role \(daemonRole)_missing"), "\(missingRole.stderr)")
            let granting = try await DaemonProcess(["install", "--db", asOwner, "--daemon-role", daemonRole]).finish(within: 30)
            #expect(granting.status == 0 && granting.stdout.contains("serve may run as \(daemonRole) (--daemon-role)"), "\(granting.stdout)\(granting.stderr)")
            // A later install without the flag keeps the grant, and grants what it adds.
            let again = try await DaemonProcess(["install", "--db", asOwner]).finish(within: 30)
            #expect(again.stdout.contains("serve may run as \(daemonRole)"), "\(again.stdout)")
            let passed = try await checkConfig()
            #expect(passed.status == 0, "\(passed.stderr)")
            #expect(passed.stdout.contains("# database: the daemon's role may read the journal"), "\(passed.stdout)")

            // serve as that role: events flow, a durable output keeps its cursor, maintenance empties a part.
            let eventLog = FileManager.default.temporaryDirectory.appending(path: "pgherald-daemon-role-\(UUID().uuidString.prefix(8)).jsonl").path
            defer { try? FileManager.default.removeItem(atPath: eventLog) }
            let daemon = try await SocketDaemon(
                database: TestDatabase(name: database.name, connInfo: asDaemon),
                arguments: ["--event-log", eventLog, "--retention", "1ms", "--prune-interval", "200ms"]
            )
            let stream = try await RawStream(socketPath: daemon.socketPath, path: "/events?table=course&format=ndjson")
            for code in ["R1", "R2", "R3"] {
                try LibpqConnection.connect(ConnectionString(asOwner))
                    .execute("INSERT INTO course (short_code, name) VALUES ($1, 'by the owner')", parameters: [code])
                try await Task.sleep(for: .milliseconds(400))
            }
            try await stream.waitForLines(3)
            try await waitFor { ((try? String(contentsOfFile: eventLog, encoding: .utf8)) ?? "").split(separator: "\n").count == 3 }
            let stopped = try await daemon.stop()
            #expect(!stopped.stderr.contains("permission denied") && !stopped.stderr.contains("level=error"), "\(stopped.stderr)")
        }

        @Test(arguments: [Durability.durable, .notifyOnly])
        func anApplicationRoleWritesWithNoGrantAndReachesNothingOfPgherald(_ durability: Durability) throws {
            let database = try TestDatabase.create(durability: durability)
            let (_, application) = try role(in: database, grants: """
                GRANT SELECT, INSERT, UPDATE, DELETE ON course TO ROLE;
                GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO ROLE
                """)
            try application.execute("SET search_path = pg_temp, \"no such schema\", public")
            try application.execute("INSERT INTO course (short_code, name) VALUES ('APP', 'By the application')")
            try application.execute("INSERT INTO course (short_code, name) SELECT 'A' || g, 'Bulk' FROM generate_series(1, 70) AS g")
            try application.execute("UPDATE course SET name = 'Changed' WHERE short_code = 'APP'")
            try application.execute("DELETE FROM course WHERE short_code = 'APP' OR short_code ~ '^A[0-9]+$'")
            if durability == .durable {
                let journal = try database.execute("SELECT sum(coalesce(event_count, 1)) FROM pgherald.journal")
                #expect(journal.rows == [["143"]])
            }
            // Closed: the journal, the settings (and so the channel), the sequence, the functions.
            for statement in [
                "SELECT count(*) FROM pgherald.journal",
                "SELECT value FROM pgherald.setting",
                "SELECT pgherald.version()",
                "SELECT nextval('pgherald.event_id')",
                #"SELECT pgherald.ring('{"id":"1","op":"INSERT","schema":"public","table":"course"}')"#,
                "INSERT INTO pgherald.journal_1 (id, txid, event) VALUES (-1, pg_current_xact_id(), '{}')",
                "INSERT INTO pgherald.journal_2 (id, txid, event) VALUES (-1, pg_current_xact_id(), '{}')",
                "SELECT setval('pgherald.journal_current', 2)",
                "CREATE TEMP TABLE mine (id int); CREATE TRIGGER forged AFTER INSERT ON mine FOR EACH ROW EXECUTE FUNCTION pgherald.publish_row()",
            ] {
                let message = refusal { () throws(LibpqError) in try application.execute(statement) }
                #expect(message?.contains("permission denied") == true, "\(statement): \(message ?? "allowed")")
            }
            // The channel appears in no function's source, which every role may read.
            let channel = try #require(try Journal.notificationChannel(on: database.connect()))
            let sources = try application.execute("SELECT count(*) FROM pg_proc WHERE strpos(prosrc, $1) > 0", parameters: [channel])
            #expect(sources.rows == [["0"]])
        }

        /// A role with no grant on a watched table listens on the channel
        /// names it can guess and looks for the real one: it learns nothing,
        /// and what it sends on a guessed channel never reaches subscribers.
        @Test(arguments: [Durability.durable, .notifyOnly])
        func aRoleWithoutPrivilegesLearnsNothingFromNotify(_ durability: Durability) async throws {
            let database = try TestDatabase.create(durability: durability)
            let daemon = try await RunningListener(database: database)
            let (name, stranger) = try role(in: database, grants: "")
            for guess in ["pgherald", "pgherald.tick", "pgherald_notify", "default"] {
                try stranger.execute("LISTEN \(try stranger.escapeIdentifier(guess))")
            }
            let channel = try #require(try Journal.notificationChannel(on: database.connect()))
            let seen = try stranger.execute("""
                SELECT count(*) FROM pg_stat_activity WHERE strpos(coalesce(query, ''), $1) > 0
                """, parameters: [String(channel.suffix(12))])
            #expect(seen.rows == [["0"]], "another role's query text is hidden")
            let privilege = try database.execute("SELECT has_table_privilege($1, 'course', 'SELECT')", parameters: [name])
            #expect(privilege.rows == [["f"]])
            try stranger.execute(#"NOTIFY pgherald, '{"id":"1","op":"INSERT","schema":"public","table":"course","pk":null,"new":{"forged":true},"old":null,"txid":"1","at":"2026-01-01T00:00:00.000000Z"}'"#)

            try database.execute("INSERT INTO course (short_code, name) VALUES ('SECRET', 'Not for strangers')")
            let delivered = try await daemon.inbox.take(1)
            #expect(delivered.first?.new?["short_code"] == .string("SECRET"), "the forged event never arrived")
            try await Task.sleep(for: .milliseconds(300))
            var heard: [String] = []
            try? stranger.receiveNotifications(until: .now + .milliseconds(200)) { channel, payload, _ in
                heard.append("\(String(cString: channel)): \(String(decoding: payload, as: UTF8.self))")
            }
            stranger.takeNotifications { channel, payload, _ in
                heard.append("\(String(cString: channel)): \(String(decoding: payload, as: UTF8.self))")
            }
            #expect(heard.allSatisfy { !$0.contains("SECRET") }, "\(heard)")
            #expect(heard.count == 1, "only its own forged notification: \(heard)")
            try await daemon.stop()
        }

        /// A trigger that cannot build its event fails the write, with a
        /// message that names pgherald, the table and the way out; nothing
        /// is written, and excluding the table lets writes through.
        @Test(arguments: [Installer.Triggers.native, .plpgsql])
        func aTriggerThatCannotPublishFailsTheWriteAndSaysWhy(_ triggers: Installer.Triggers) throws {
            try #require(triggers == .plpgsql || TestDatabase.hasNativeTriggers)
            let database = try TestDatabase.create(install: false)
            let admin = try database.connect()
            try Installer.install(on: admin, triggers: triggers)
            // Event ids run out: the triggers cannot build an event.
            try admin.execute("SELECT setval('pgherald.event_id', 5); ALTER SEQUENCE pgherald.event_id MAXVALUE 5")
            let full = fullRefusal(on: admin, "INSERT INTO course (short_code, name) VALUES ('FAIL', 'Cannot publish')")
            #expect(full.contains("reached maximum value of sequence"), "\(full)")
            if triggers == .native {
                #expect(full.contains("pgherald could not publish this change to public.course"), "\(full)")
                #expect(full.contains("SELECT pgherald.exclude('public.course')"), "\(full)")
            } else {
                #expect(full.contains("PL/pgSQL function pgherald.publish_statement_durable()"), "\(full)")
            }
            let written = try admin.execute("SELECT count(*) FROM course WHERE short_code = 'FAIL'")
            #expect(written.rows == [["0"]])
            try admin.execute("SELECT pgherald.exclude('public.course')")
            try admin.execute("INSERT INTO course (short_code, name) VALUES ('FAIL', 'Unpublished')")
        }

        /// The whole message a refused statement gets, with its context.
        private func fullRefusal(on connection: LibpqConnection, _ statement: String) -> String {
            do {
                try connection.execute(statement)
                return "allowed"
            } catch {
                return "\(error.message) \(error.context ?? "")"
            }
        }
    }
}
