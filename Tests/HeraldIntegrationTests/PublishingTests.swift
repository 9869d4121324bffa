import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// Row changes on the enrolment tables reach the broker as exact events.
    @Suite
    struct PublishingTests {
        @Test func enrolmentWritesArriveExactlyInCommitOrderWithCounts() async throws {
            let database = try TestDatabase.create()
            let daemon = try await RunningListener(database: database)
            let connection = try database.connect()
            for statement in [
                "INSERT INTO student (first_name, last_name) VALUES ('Ada', 'Lovelace')",
                "INSERT INTO course (short_code, name) VALUES ('ADA3M', 'Drama')",
                "INSERT INTO enrols_in (student_id, course_id) VALUES (4, 11)",
                "UPDATE course SET name = 'Theatre' WHERE id = 11",
                "UPDATE enrols_in SET course_id = 1 WHERE student_id = 4",
                "UPDATE student SET last_name = 'King' WHERE id = 4",
                "DELETE FROM enrols_in WHERE student_id = 4",
                "DELETE FROM course WHERE id = 11",
                "DELETE FROM student WHERE id = 4",
            ] {
                try connection.execute(statement)
            }

            let events = try await daemon.inbox.take(9)
            let summary = events.map { "\($0.operation) \($0.table.name) \(($0.primaryKey ?? [:]).jsonText)" }
            #expect(summary == [
                #"INSERT student {"id":4}"#,
                #"INSERT course {"id":11}"#,
                #"INSERT enrols_in {"student_id":4,"course_id":11}"#,
                #"UPDATE course {"id":11}"#,
                #"UPDATE enrols_in {"student_id":4,"course_id":1}"#,
                #"UPDATE student {"id":4}"#,
                #"DELETE enrols_in {"student_id":4,"course_id":1}"#,
                #"DELETE course {"id":11}"#,
                #"DELETE student {"id":4}"#,
            ])
            #expect(events.map(\.count) == Array(1...9))
            #expect(events.map { Int($0.id)! } == events.map { Int($0.id)! }.sorted())
            #expect(Set(events.map(\.id)).count == 9)

            #expect(events[0].new?.jsonText == #"{"id":4,"first_name":"Ada","last_name":"Lovelace"}"#)
            #expect(events[0].old == nil)
            #expect(events[3].old?["name"] == .string("Drama"))
            #expect(events[3].new?["name"] == .string("Theatre"))
            #expect(events[4].old?.jsonText == #"{"student_id":4,"course_id":11}"#)
            #expect(events[8].new == nil)
            #expect(events[8].old?.jsonText == #"{"id":4,"first_name":"Ada","last_name":"King"}"#)
            #expect(daemon.broker.statistics.tableCounts == [
                TableName(name: "student"): 3, TableName(name: "course"): 3, TableName(name: "enrols_in"): 3,
            ])
            try await daemon.stop()
        }

        /// Transactions that share no row come in the order of their last writes: one that
        /// committed before another wrote its last event comes first, whatever their ids.
        @Test func aTransactionComesAfterEveryOneThatCommittedBeforeItsLastWrite() async throws {
            let database = try TestDatabase.create()
            // Written while the daemon is stopped, so that one read of the journal finds both, as a busy daemon's does.
            try await RunningListener(database: database).stop()
            let early = try database.connect()
            let late = try database.connect()
            try early.execute("BEGIN")
            try early.execute("INSERT INTO student (first_name, last_name) VALUES ('First', 'Written')")
            try late.execute("INSERT INTO student (first_name, last_name) VALUES ('Second', 'Written')")
            try early.execute("INSERT INTO student (first_name, last_name) VALUES ('Third', 'Written')")
            try early.execute("COMMIT")

            let daemon = try await RunningListener(database: database)
            let events = try await daemon.inbox.take(3)
            #expect(events.map { $0.new?["first_name"] } == [.string("Second"), .string("First"), .string("Third")])
            #expect(events.map(\.count) == [1, 2, 3])
            try await daemon.stop()
        }

        @Test func truncatePublishesOneEvent() async throws {
            let database = try TestDatabase.create()
            let daemon = try await RunningListener(database: database)
            try database.execute("TRUNCATE enrols_in")
            let event = try await daemon.inbox.next()
            #expect(event.operation == .truncate)
            #expect(event.table == TableName(name: "enrols_in"))
            #expect(event.primaryKey == nil && event.new == nil && event.old == nil)
            try await daemon.stop()
        }

        @Test func tableCreatedAfterInstallPublishes() async throws {
            let database = try TestDatabase.create()
            let daemon = try await RunningListener(database: database)
            try database.execute("CREATE TABLE teacher (code text PRIMARY KEY, name text)")
            try database.execute("INSERT INTO teacher VALUES ('GOR', 'Mr. Gordon')")
            let event = try await daemon.inbox.next()
            #expect(event.table == TableName(name: "teacher"))
            #expect(event.primaryKey == ["code": .string("GOR")])
            #expect(event.new?["name"] == .string("Mr. Gordon"))
            try await daemon.stop()
        }

        @Test func rowsOfAMegabyteArriveWholeInDurableMode() async throws {
            let database = try TestDatabase.create()
            let daemon = try await RunningListener(database: database)
            try database.execute("CREATE TABLE document (id int PRIMARY KEY, body text)")
            try database.execute("INSERT INTO document VALUES (1, 'short')")
            try database.execute("UPDATE document SET body = repeat('x', 1000000) WHERE id = 1")
            try database.execute("INSERT INTO document VALUES (2, 'after')")

            let events = try await daemon.inbox.take(3)
            #expect(events.map(\.operation) == [.insert, .update, .insert], "the large event keeps its place")
            #expect(!events[1].rowDataOmitted)
            #expect(events[1].new?["body"]?.stringValue?.count == 1_000_000)
            #expect(events[1].old?["body"] == .string("short"))
            #expect(events[2].new?["body"] == .string("after"))
            try await daemon.stop()
        }

        @Test func rowsLargerThanTheNotifyLimitNeverFailTheWriteInNotifyOnlyMode() async throws {
            let database = try TestDatabase.create(durability: .notifyOnly)
            let daemon = try await RunningListener(database: database)
            try database.execute("CREATE TABLE document (id int PRIMARY KEY, body text)")
            try database.execute("INSERT INTO document VALUES (1, 'short')")
            let update = try database.execute("UPDATE document SET body = repeat('x', 20000) WHERE id = 1")
            #expect(update.affectedRows == 1)

            let events = try await daemon.inbox.take(2)
            #expect(!events[0].rowDataOmitted)
            #expect(events[1].operation == .update)
            #expect(events[1].rowDataOmitted)
            #expect(events[1].primaryKey == ["id": .number(JSONNumber(1))])
            #expect(events[1].new == nil && events[1].old == nil)
            #expect(events[1].jsonText.contains(#""omitted":true"#))
            let stored = try database.execute("SELECT length(body) FROM document WHERE id = 1")
            #expect(stored.rows == [["20000"]])
            try await daemon.stop()
        }

        @Test func identicalUpdatesInOneTransactionStayTwoEvents() async throws {
            let database = try TestDatabase.create()
            let daemon = try await RunningListener(database: database)
            let connection = try database.connect()
            try connection.execute("BEGIN")
            try connection.execute("UPDATE student SET first_name = first_name WHERE id = 1")
            try connection.execute("UPDATE student SET first_name = first_name WHERE id = 1")
            try connection.execute("COMMIT")
            let events = try await daemon.inbox.take(2)
            #expect(events[0].id != events[1].id)
            #expect(events[0].transactionID == events[1].transactionID)
            #expect(events[0].new == events[1].new)
            try await daemon.stop()
        }

        @Test func hostilePayloadsAreSkipped() async throws {
            let database = try TestDatabase.create()
            let daemon = try await RunningListener(database: database)
            let connection = try database.connect()
            // The owner may read the install's channel; a stranger cannot (AccessControlTests).
            let channel = try #require(try Journal.notificationChannel(on: connection))
            for payload in ["not json", #"{"op":"INSERT","id":"1"}"#, "[1,2,3]", String(repeating: "[", count: 5000)] {
                try connection.execute("SELECT pg_notify($1, $2)", parameters: [channel, payload])
            }
            try connection.execute("INSERT INTO course (short_code, name) VALUES ('AFTER', 'After the garbage')")
            let event = try await daemon.inbox.next()
            #expect(event.new?["short_code"] == .string("AFTER"))
            #expect(event.count == 1)
            #expect(daemon.listener.health.status == .listening)
            try await daemon.stop()
        }
    }
}
