import Foundation
import Herald
import HeraldClient
import HeraldPostgres
import Synchronization
import Testing

extension IntegrationTests {
    /// The Swift client, `pgherald tail`, `status` and `demo` against a real daemon.
    @Suite
    struct ClientTests {
        struct Booking: Decodable, Equatable {
            struct Extras: Decodable, Equatable {
                var seats: Int
                var notes: [String]
            }

            var id: Int64
            var guestName: String
            var price: Decimal
            var reference: UUID
            var bookedAt: Date
            var arrives: Date
            var localTime: Date
            var extras: Extras
            var cancelledAt: Date?
            var paid: Bool
        }

        /// Rows as the triggers write PostgreSQL's types decode into the app's own struct, through the client.
        @Test func eventsDecodeIntoTheAppsOwnTypes() async throws {
            let database = try TestDatabase.create(install: false)
            try database.execute("""
                SET TIME ZONE 'Asia/Kolkata';
                CREATE TABLE booking (
                    id bigint PRIMARY KEY, guest_name text, price numeric, reference uuid, booked_at timestamptz,
                    arrives date, local_time timestamp, extras jsonb, cancelled_at timestamptz, paid boolean
                )
                """)
            try Installer.install(on: database.connect())
            let daemon = try await SocketDaemon(database: database)
            let first = Task { () throws -> Event? in
                for try await event in daemon.client.events(EventFilter(tables: [TableName(name: "booking")])) { return event }
                return nil
            }
            try await daemon.waitForSubscribers(1, kind: "sse")
            try database.execute("""
                SET TIME ZONE 'America/Los_Angeles';
                INSERT INTO booking VALUES (9223372036854775807, 'Ada', 12345678901234567890.123456789, '1b4e28ba-2fa1-11d2-883f-0016d3cca427',
                    '2026-11-26 10:00:00.123456+00', '2027-01-04', '2026-11-26 10:00:00', '{"seats": 2, "notes": ["window"]}', NULL, true)
                """)
            let event = try #require(try await first.value)
            let booking = try #require(try event.new(as: Booking.self))
            #expect(booking.id == .max && booking.guestName == "Ada" && booking.paid && booking.cancelledAt == nil)
            #expect(booking.price == Decimal(string: "12345678901234567890.123456789"), "\(booking.price)")
            #expect(booking.reference == UUID(uuidString: "1b4e28ba-2fa1-11d2-883f-0016d3cca427"))
            #expect(abs(booking.bookedAt.timeIntervalSince1970 - 1_795_687_200.123456) < 0.000_001, "the writer's zone does not move the instant")
            #expect(booking.arrives.timeIntervalSince1970 == 1_799_020_800)
            #expect(booking.localTime.timeIntervalSince1970 == 1_795_687_200, "a timestamp without zone reads as UTC")
            #expect(booking.extras == .init(seats: 2, notes: ["window"]))
            _ = try await daemon.stop()
        }

        @Test func clientStreamsAndReconnectsWhenTheDaemonRestarts() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database)
            let received = Mutex<[HeraldClient.Message]>([])
            let following = Task {
                for try await message in daemon.client.messages(EventFilter(tables: [TableName(name: "course")])) {
                    // Attempts while the daemon is away are reported as they fail; the test follows the rest.
                    if case .unreachable = message { continue }
                    received.withLock { $0.append(message) }
                }
            }
            defer { following.cancel() }
            try await daemon.waitForSubscribers(1, kind: "sse")
            try database.execute("INSERT INTO course (short_code, name) VALUES ('ONE', 'Before the restart')")
            try await waitFor { received.withLock { $0.count } == 1 }

            let stopped = try await daemon.stop()
            #expect(stopped.status == 0, "\(stopped.stderr)")
            let restarted = try await SocketDaemon(database: database, socketPath: daemon.socketPath)
            try await restarted.waitForSubscribers(1, kind: "sse")
            try database.execute("INSERT INTO course (short_code, name) VALUES ('TWO', 'After the restart')")
            try await waitFor { received.withLock { $0.count } == 3 }

            let messages = received.withLock { $0 }
            guard case .event(let first) = messages[0], case .reconnected = messages[1], case .event(let second) = messages[2] else {
                Issue.record("unexpected messages: \(messages)")
                return
            }
            #expect(first.new?["short_code"] == .string("ONE"))
            #expect(second.new?["short_code"] == .string("TWO"))
            // A new daemon counts from 1 again.
            #expect(second.count == 1)
        }

        @Test func clientGivesUpOnARejectedFilter() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database)
            await #expect {
                for try await _ in daemon.client.events(EventFilter(tables: [TableName(name: "no_such_table")])) {}
            } throws: { error in
                (error as? HeraldClientError)?.code == .rejected && "\(error)".contains("unknown_table")
            }
        }

        @Test func changeNotifierOverTheSocketCoalescesRefreshes() async throws {
            let database = try TestDatabase.create()
            try database.execute("CREATE TABLE mark (id int PRIMARY KEY, score int)")
            try database.execute("INSERT INTO mark SELECT g, 0 FROM generate_series(1, 1000) g")
            let daemon = try await SocketDaemon(database: database)
            let (notifier, viewModel) = await MainActor.run {
                // Default timing is unit-tested; a wider quiet period keeps a starved CI machine from splitting the burst.
                let notifier = ChangeNotifier(configuration: .init(quietPeriod: .milliseconds(200)))
                let viewModel = EnrolmentsByCourseViewModel(database: database)
                notifier.register(viewModel)
                return (notifier, viewModel)
            }
            let following = Task { @MainActor in try await notifier.follow(daemon.client) }
            defer { following.cancel() }
            try await daemon.waitForSubscribers(1, kind: "sse")
            try database.execute("UPDATE mark SET score = score + 1")
            do {
                try await waitFor { await MainActor.run { notifier.changeCount == 1000 && viewModel.refreshes == 1 } }
            } catch {
                Issue.record("changeCount \(await MainActor.run { notifier.changeCount }), refreshes \(await MainActor.run { viewModel.refreshes })")
                throw error
            }
            try await Task.sleep(for: .milliseconds(200))
            #expect(await MainActor.run { viewModel.refreshes } == 1)
        }

        @Test func tailPrintsJSONLinesAndReconnects() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database)
            let tail = try DaemonProcess(["tail", "--socket", daemon.socketPath, "--table", "course", "--op", "INSERT"])
            try await daemon.waitForSubscribers(1, kind: "sse")
            try database.execute("UPDATE course SET name = 'ignored' WHERE id = 1")
            try database.execute("INSERT INTO course (short_code, name) VALUES ('TAIL1', 'First')")
            let first = try await tail.readLine { $0.contains("TAIL1") }
            #expect(try Event(payload: first).operation == .insert)
            #expect(first.hasPrefix(#"{"id":""#))

            _ = try await daemon.stop()
            let restarted = try await SocketDaemon(database: database, socketPath: daemon.socketPath)
            try await restarted.waitForSubscribers(1, kind: "sse")
            try database.execute("INSERT INTO course (short_code, name) VALUES ('TAIL2', 'Second')")
            let second = try await tail.readLine { $0.contains("TAIL2") }
            #expect(try Event(payload: second).count == 1)
            tail.signal(SIGTERM)
            let result = try await tail.finish()
            #expect(result.stderr.contains("reconnected"))
        }

        @Test func tailRejectsABadFilterBeforeConnecting() async throws {
            let result = try await DaemonProcess(["tail", "--socket", "/nonexistent/pgherald.sock", "--where", "name.match.x"]).finish()
            #expect(result.status != 0)
            #expect(result.stderr.contains("--where: unknown operator 'match'"))
        }

        @Test func statusPrintsTheDaemonReadably() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database)
            try database.execute("INSERT INTO course (short_code, name) VALUES ('S', 's')")
            try await waitFor { (try? await daemon.statistics().changeCount) == 1 }
            let result = try await DaemonProcess(["status", "--socket", daemon.socketPath]).finish()
            #expect(result.status == 0)
            #expect(result.stdout.contains("listener:    listening"))
            #expect(result.stdout.contains("changes:     1"))
            #expect(result.stdout.contains("public.course  1"))
            let unreachable = try await DaemonProcess(["status", "--socket", "/nonexistent/pgherald.sock"]).finish()
            #expect(unreachable.status != 0)
            #expect(unreachable.stderr.contains("cannot reach pgherald"))
        }

        @Test func demoRefreshesEnrolmentsByCourseWhenTheDatabaseChanges() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database)
            let demo = try DaemonProcess(["demo", "--db", database.connInfo, "--socket", daemon.socketPath])
            let before = try await demo.readLine { $0.contains("Functions") }
            #expect(before.hasSuffix("  3"))
            try await daemon.waitForSubscribers(1, kind: "sse")
            try database.execute("DELETE FROM enrols_in WHERE student_id = 1 AND course_id = 2")
            let after = try await demo.readLine { $0.contains("Functions") }
            #expect(after.hasSuffix("  2"))
            demo.signal(SIGTERM)
            _ = try await demo.finish()
        }
    }
}
