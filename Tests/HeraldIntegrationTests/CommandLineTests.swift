import Foundation
import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// The `pgherald` executable, run as a user would.
    @Suite
    struct CommandLineTests {
        @Test func startupWithABadPasswordExitsWithOneClearLine() async throws {
            let database = try TestDatabase.create(enrolment: false, install: false)
            let role = "herald_login_\(database.name)"
            try database.execute("CREATE ROLE \(role) LOGIN PASSWORD 'correct-horse-battery'")
            let port = try #require(try database.execute("SHOW port").rows.first?.first ?? nil)
            let secret = "Wr0ng-Pa55word"
            let daemon = try DaemonProcess([
                "serve", "--db", "host=127.0.0.1 port=\(port) dbname=\(database.name) user=\(role) password=\(secret)", "--no-socket",
            ])
            let result = try await daemon.finish()
            #expect(result.status != 0)
            let errorLines = result.stderr.split(separator: "\n").filter { $0.hasPrefix("Error:") }
            #expect(errorLines.count == 1)
            #expect(errorLines.first?.contains("password authentication failed") == true, "\(result.stderr)")
            #expect(!result.stderr.contains(secret))
            #expect(!result.stdout.contains(secret))
        }

        @Test func startupAgainstAnUnreachableServerFailsAtOnce() async throws {
            let started = ContinuousClock.now
            let daemon = try DaemonProcess(["serve", "--db", "host=127.0.0.1 port=1 dbname=nowhere password=hunter2", "--no-socket"])
            let result = try await daemon.finish()
            #expect(result.status != 0)
            #expect(result.stderr.contains("Error: cannot connect"))
            #expect(!result.stderr.contains("hunter2"))
            #expect(ContinuousClock.now - started < .seconds(10))
        }

        @Test func underSystemdEveryLogLineCarriesItsSyslogPriority() async throws {
            let daemon = try DaemonProcess(
                ["serve", "--db", "host=127.0.0.1 port=1", "--no-socket", "--log-format", "logfmt", "--log-level", "debug,lifecycle=info"],
                environment: ["JOURNAL_STREAM": "8:12345"]
            )
            let result = try await daemon.finish()
            let logLines = result.stderr.split(separator: "\n").filter { !$0.hasPrefix("Error:") }
            #expect(!logLines.isEmpty)
            #expect(logLines.allSatisfy { $0.hasPrefix("<") })
            #expect(logLines.contains { $0.hasPrefix("<6>") && $0.contains("category=lifecycle msg=starting") })
            #expect(!logLines.contains { $0.contains("category=lifecycle") && $0.contains("level=debug") })
        }

        @Test func invalidConnectionStringIsRejected() async throws {
            let result = try await DaemonProcess(["serve", "--db", "host=x password=se cret", "--no-socket"]).finish()
            #expect(result.status != 0)
            #expect(result.stderr.contains("invalid connection string"))
            #expect(!result.stderr.contains("cret"))
        }

        @Test func installListsTablesAndUninstallKeepsData() async throws {
            let database = try TestDatabase.create(install: false)
            try database.execute("CREATE SCHEMA school; CREATE TABLE school.room (number int PRIMARY KEY)")
            let install = try await DaemonProcess(["install", "--db", database.connInfo, "--schema", "public", "--schema", "school"]).finish()
            #expect(install.status == 0, "\(install.stderr)")
            #expect(install.stdout.contains("watching 4 tables"))
            #expect(install.stdout.contains("public.enrols_in (pk: student_id, course_id)"))
            #expect(install.stdout.contains("school.room (pk: number)"))

            // Running it again changes nothing and keeps the watched schemas.
            let again = try await DaemonProcess(["install", "--db", database.connInfo]).finish()
            #expect(again.status == 0)
            #expect(again.stdout.contains("watching 4 tables"))

            let badSchema = try await DaemonProcess(["install", "--db", database.connInfo, "--schema", "nope"]).finish()
            #expect(badSchema.status != 0)
            #expect(badSchema.stderr.contains(#"schema "nope" does not exist"#))

            let uninstall = try await DaemonProcess(["uninstall", "--db", database.connInfo]).finish()
            #expect(uninstall.status == 0, "\(uninstall.stderr)")
            let leftovers = try database.execute("""
                SELECT (SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'pgherald%'),
                       (SELECT count(*) FROM pg_namespace WHERE nspname = 'pgherald'),
                       (SELECT count(*) FROM pg_event_trigger WHERE evtname LIKE 'pgherald%'),
                       (SELECT count(*) FROM enrols_in), (SELECT count(*) FROM course)
                """)
            #expect(leftovers.rows == [["0", "0", "0", "12", "10"]])
        }

        @Test func serveStdoutJSONPrintsTheSharedShapeAndStopsCleanlyOnSIGTERM() async throws {
            let database = try TestDatabase.create()
            let daemon = try DaemonProcess(["serve", "--db", database.connInfo, "--no-socket", "--stdout", "json", "--log-format", "json"])
            // Writes before the daemon listens are lost in notify-only mode; repeat until one shows.
            let writer = Task {
                for attempt in 1...100 {
                    _ = try? database.execute("UPDATE course SET name = $1 WHERE id = 1", parameters: ["Computer Science \(attempt)"])
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            let line = try await daemon.readLine { $0.contains(#""op":"UPDATE""#) }
            writer.cancel()
            let event = try Event(payload: line)
            #expect(event.table == TableName(name: "course"))
            #expect(event.primaryKey == ["id": .number(JSONNumber(1))])
            #expect(line.hasPrefix(#"{"id":""#))
            #expect(line.contains(#","count":"#))

            daemon.signal(SIGTERM)
            let result = try await daemon.finish()
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stderr.contains(#""category":"lifecycle","msg":"stopped""#))
        }
    }
}
