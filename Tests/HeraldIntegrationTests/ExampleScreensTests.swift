import Foundation
import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// The seed app's screens (Examples/), each run as a process against a
    /// `pgherald serve` over HTTPS, as a signed-in user on another machine would.
    @Suite
    struct ExampleScreensTests {
        /// An example's binary, beside the test bundle.
        static func example(_ name: String) -> String {
            DaemonProcess.executable.deletingLastPathComponent().appending(path: name).path
        }

        /// An example's own configuration file, as text.
        static func exampleConfiguration(_ name: String) throws -> String {
            try String(contentsOf: TestDatabase.repositoryRoot.appending(path: "Examples/\(name)/pgherald.yaml"), encoding: .utf8)
        }

        /// A database with an example's schema (a file under Examples/) and pgherald installed.
        static func database(loading file: String) throws -> TestDatabase {
            let database = try TestDatabase.create(enrolment: false, install: false)
            try database.execute(String(contentsOf: TestDatabase.repositoryRoot.appending(path: "Examples/\(file)"), encoding: .utf8))
            try Installer.install(on: database.connect())
            return database
        }

        /// Runs example `name` against `served` with `token` in a file, and `arguments`.
        static func run(_ name: String, _ served: NetworkTests.Served, token: String, _ arguments: [String]) throws -> DaemonProcess {
            let tokenFile = served.certificates.directory.appending(path: "token-\(UUID().uuidString.prefix(6))").path
            try token.write(toFile: tokenFile, atomically: true, encoding: .utf8)
            return try DaemonProcess(
                ["--url", served.base, "--token-file", tokenFile, "--ca-file", served.certificates.caPath] + arguments,
                executable: URL(fileURLWithPath: Self.example(name))
            )
        }

        @Test func enrolmentsByCourseAsASignedInUser() async throws {
            let database = try TestDatabase.create()
            let role = RowSecurityTests.makeRole()
            defer { _ = try? database.execute("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
            try RowSecurityTests.createCoursesByPrefix(database, role: role)
            let queries = try Self.exampleConfiguration("EnrolmentsByCourse")
                .replacingOccurrences(of: "    key: [course_id]", with: "    key: [course_id]\n    as: subscriber")
            let served = try await NetworkTests.start(
                database, role: role, roleGrant: "{rls: true, queries: [enrolments_by_course]}", queries: queries
            )
            let screen = try Self.run("EnrolmentsByCourse", served, token: NetworkTests.token(role: role, sub: "SCH"), ["--count", "1"])
            let result = try await screen.finish(within: 30)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.contains("Chemistry") && !result.stdout.contains("English") && !result.stdout.contains("Functions"), "\(result.stdout)")

            let stranger = try Self.run("EnrolmentsByCourse", served, token: "not-a-token-0123456789abcdef", ["--count", "1"])
            let refused = try await stranger.finish(within: 30)
            #expect(refused.status == 69 && refused.stderr.contains("401"), "\(refused.stderr)")
            _ = try await served.daemon.stop()
        }

        @Test func aDetailViewFollowsItsParentAndClosesWhenItIsDeleted() async throws {
            let database = try Self.database(loading: "PlantSpecies/plants.sql")
            let served = try await NetworkTests.start(
                database, roleGrant: "queries: [species, species_detail]", queries: try Self.exampleConfiguration("PlantSpecies")
            )
            let screen = try Self.run("PlantSpecies", served, token: NetworkTests.token(sub: "gardener"), ["--species", "1"])
            let list = try await screen.readLine(within: 30) { $0.hasPrefix("Species:") }
            #expect(list == "Species: Basil, Sunflower, Tomato")
            let opened = try await screen.readLine(within: 30) { $0.hasPrefix("Tomato (species 1") }
            #expect(opened.contains("result 1"))
            _ = try await screen.readLine { $0.contains("seedling 2  planted 2026-03-08  2.0 cm") }

            try database.execute("UPDATE species SET name = 'Cherry tomato' WHERE id = 1")
            _ = try await screen.readLine { $0.hasPrefix("Cherry tomato (species 1") }
            try database.execute("INSERT INTO seedling (species_id, planted_on) VALUES (1, '2026-04-01')")
            _ = try await screen.readLine { $0.contains("planted 2026-04-01  not measured") }
            // Another species' change does not concern the detail.
            try database.execute("UPDATE species SET name = 'Thai basil' WHERE id = 2")
            try database.execute("DELETE FROM species WHERE id = 1")
            let closed = try await screen.readLine { $0.hasPrefix("Closed:") || $0.contains("basil") }
            #expect(closed == "Closed: species 1 was deleted")
            let result = try await screen.finish(within: 10)
            #expect(result.status == 0, "\(result.stderr)")
            _ = try await served.daemon.stop()
        }

        @Test func rowsWithTheirAssociationsInOneQueryChangeOneListAtATime() async throws {
            let database = try Self.database(loading: "RemindersLists/reminders.sql")
            let served = try await NetworkTests.start(
                database, roleGrant: "queries: [reminders_lists]", queries: try Self.exampleConfiguration("RemindersLists")
            )
            let token = NetworkTests.token(sub: "planner")
            let screen = try Self.run("RemindersLists", served, token: token, [])
            _ = try await screen.readLine(within: 30) { $0.hasPrefix("Reminders (result 1); changed: Groceries, Work, Garden") }
            let wire = try await RawStream(url: served.base + "/queries/reminders_lists?access_token=\(token)", client: TestCertificates.httpClient)
            _ = try await wire.text { $0.contains("event: result") }

            try database.execute("UPDATE reminder SET is_completed = true WHERE title = 'Milk'")
            let second = try await screen.readLine { $0.hasPrefix("Reminders (result 2)") }
            #expect(second == "Reminders (result 2); changed: Groceries")
            _ = try await screen.readLine { $0 == "  Groceries (1/3 done)" }
            // On the wire too, the difference holds the one list whose reminder changed.
            let frames = try await wire.text { $0.contains("event: diff") }
            let diff = try #require(frames.split(separator: "\n").first { $0.hasPrefix("data: ") && $0.contains("\"diff\"") })
            let object = try JSONParser.parse(Array(diff.dropFirst(6).utf8))
            #expect(object["changed"]?.arrayValue?.count == 1 && object["changed"]?.arrayValue?.first?["title"] == .string("Groceries"), "\(diff)")
            #expect((object["added"]?.arrayValue ?? []).isEmpty && (object["removed"]?.arrayValue ?? []).isEmpty, "\(diff)")

            try database.execute("INSERT INTO reminder (list_id, title) VALUES (3, 'Prune the roses')")
            let third = try await screen.readLine { $0.hasPrefix("Reminders (result 3)") }
            #expect(third == "Reminders (result 3); changed: Garden")
            screen.signal(SIGTERM)
            _ = try await served.daemon.stop()
        }
    }
}
