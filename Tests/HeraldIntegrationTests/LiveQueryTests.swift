import Foundation
import Herald
import HeraldClient
import HeraldPostgres
import Logging
import Testing

struct Student: Decodable, Hashable, Sendable {
    var id: Int
    var firstName: String
}

/// The seed app's row type, decoded from a live query's rows.
struct CourseEnrolment: Decodable, Hashable, Sendable {
    var courseId: Int
    var name: String
    var enrolled: Int64
}

extension IntegrationTests {
    @Suite struct LiveQueryTests {
        struct Committed: Sendable { var transactionID: UInt64; var writes: [Write] }
        struct Write: Sendable { var id: Int; var value: Int? }
        struct Observation: Sendable { var snapshot: TransactionSnapshot; var rows: [String: String] }

        static let enrolmentsByCourse = LiveQueryDefinition(
            name: "enrolments_by_course",
            sql: "select c.id as course_id, c.name, count(e.*) as enrolled from course c left join enrols_in e on e.course_id = c.id group by c.id",
            key: ["course_id"]
        )
        static let studentsOf = LiveQueryDefinition(
            name: "students_of",
            sql: "select s.id, s.first_name from student s join enrols_in e on e.student_id = s.id where e.course_id = $1::int",
            key: ["id"], parameters: ["course_id"]
        )

        /// A broker fed by a real listener, and an engine following it.
        struct Engine: Sendable {
            let daemon: RunningListener
            let engine: LiveQueryEngine
            let task: Task<Void, any Error>

            init(_ database: TestDatabase, _ definitions: [LiveQueryDefinition], heartbeatInterval: Duration = .seconds(15)) async throws {
                daemon = try await RunningListener(database: database)
                var logger = Logger(label: "queries")
                logger.logLevel = .warning
                let engine = LiveQueryEngine(
                    definitions: definitions,
                    configuration: .init(
                        coalescing: .init(quietPeriod: .milliseconds(50), maximumDelay: .milliseconds(250)), heartbeatInterval: heartbeatInterval
                    ),
                    broker: daemon.broker, database: try ConnectionString(database.connInfo), logger: logger
                )
                self.engine = engine
                task = Task { try await engine.run() }
                let broker = daemon.broker
                try await waitFor { broker.statistics.subscribersByKind["live-queries"] == 1 }
            }

            var evaluations: UInt64 { engine.statistics.values.reduce(0) { $0 + $1.evaluations } }

            func stop() async throws {
                task.cancel()
                try await daemon.stop()
            }
        }

        /// Rows as a subscriber holds them, by key, kept by applying each update.
        static func apply(_ update: LiveQueryUpdate, to rows: inout [String: String], key: String) {
            func keyOf(_ row: RawJSON) -> String { row.value.objectValue?[key].map { RawJSON($0).description } ?? "?" }
            guard let difference = update.difference else {
                rows = Dictionary(uniqueKeysWithValues: update.result.rows.map { (keyOf($0), $0.description) })
                return
            }
            for row in difference.added + difference.changed { rows[keyOf(row)] = row.description }
            for removed in difference.removed {
                if case .array(let values) = removed.value, let first = values.first { rows[RawJSON(first).description] = nil }
            }
        }

        static func queryNow(_ database: TestDatabase, _ definition: LiveQueryDefinition, parameters: [String] = [], key: String) throws -> [String: String] {
            let result = try database.execute("SELECT row_to_json(q)::text FROM (\(definition.sql)) q", parameters: parameters)
            var rows: [String: String] = [:]
            for row in result.rows {
                let json = try Array((row[0] ?? "").utf8).withUnsafeBufferPointer { try RawJSON(validating: $0) }
                rows[json.value.objectValue.flatMap { $0[key] }.map { RawJSON($0).description } ?? "?"] = json.description
            }
            return rows
        }

        @Test func aHundredSubscribersShareOneEvaluationPerBurstAndNoneWhileQuiet() async throws {
            let database = try TestDatabase.create()
            let running = try await Engine(database, [Self.enrolmentsByCourse])
            var subscriptions: [LiveQuerySubscription] = []
            var iterators: [LiveQuerySubscription.AsyncIterator] = []
            for _ in 0..<100 {
                let subscription = try await running.engine.subscribe("enrolments_by_course")
                subscriptions.append(subscription)
                iterators.append(subscription.makeAsyncIterator())
            }
            let expected = try Self.queryNow(database, Self.enrolmentsByCourse, key: "course_id")
            for index in iterators.indices {
                var rows: [String: String] = [:]
                let first = try #require(try await iterators[index].next())
                #expect(first.difference == nil)
                Self.apply(first, to: &rows, key: "course_id")
                #expect(rows == expected)
            }
            #expect(running.evaluations == 1, "one evaluation for a hundred subscribers")

            try await Task.sleep(for: .milliseconds(500))
            #expect(running.evaluations == 1, "no evaluation while the tables are quiet")

            try database.execute("INSERT INTO student (first_name, last_name) SELECT 'S' || g, 'L' FROM generate_series(1, 20) g")
            #expect(running.evaluations == 1, "student is not read by the query")
            try database.execute("""
                BEGIN;
                INSERT INTO enrols_in (student_id, course_id) SELECT s.id, 1 FROM student s WHERE s.first_name LIKE 'S%' ON CONFLICT DO NOTHING;
                INSERT INTO course (short_code, name) VALUES ('NEW', 'New course');
                COMMIT;
                """)
            let after = try Self.queryNow(database, Self.enrolmentsByCourse, key: "course_id")
            for index in iterators.indices {
                let update = try #require(try await iterators[index].next())
                let difference = try #require(update.difference)
                #expect(difference.added.count == 1 && difference.changed.count == 1 && difference.removed.isEmpty)
                #expect(update.transactionID != nil)
            }
            #expect(running.evaluations == 2, "one more evaluation for the burst")
            var rows = expected
            try #require(try await running.engine.subscribe("enrolments_by_course").first { _ in true }).map { Self.apply($0, to: &rows, key: "course_id") }
            #expect(rows == after)
            #expect(running.engine.statistics["enrolments_by_course"]?.subscribers == 100 || running.engine.statistics["enrolments_by_course"]?.subscribers == 101)
            subscriptions.forEach { $0.cancel() }
            try await running.stop()
        }

        @Test func parametersAreBoundNeverPastedAndEachSetOfValuesIsItsOwnResult() async throws {
            let database = try TestDatabase.create()
            let running = try await Engine(database, [Self.studentsOf])
            var two = try await running.engine.subscribe("students_of", parameters: ["course_id": "2"]).makeAsyncIterator()
            var three = try await running.engine.subscribe("students_of", parameters: ["course_id": "3"]).makeAsyncIterator()
            var rowsOfTwo: [String: String] = [:]
            Self.apply(try #require(try await two.next()), to: &rowsOfTwo, key: "id")
            #expect(rowsOfTwo == (try Self.queryNow(database, Self.studentsOf, parameters: ["2"], key: "id")))
            _ = try await three.next()

            let hostile = try await running.engine.subscribe("students_of", parameters: ["course_id": "2; DROP TABLE student"])
            await #expect(throws: LiveQueryError.self) { _ = try await hostile.first { _ in true } }
            #expect(try database.execute("SELECT count(*) FROM student").rows.count == 1, "the value was bound, not pasted")
            await #expect(throws: LiveQueryError.self) { _ = try await running.engine.subscribe("students_of") }
            await #expect(throws: LiveQueryError.self) { _ = try await running.engine.subscribe("nope") }

            let student = try #require(try database.execute("INSERT INTO student (first_name, last_name) VALUES ('Ada', 'L') RETURNING id").rows.first?.first ?? nil)
            try database.execute("INSERT INTO enrols_in VALUES ($1, 2)", parameters: [student])
            let added = try #require(try await two.next()?.difference)
            #expect(added.added.count == 1 && added.added[0].description.contains("Ada"))
            try database.execute("DELETE FROM enrols_in WHERE student_id = $1", parameters: [student])
            let removed = try #require(try await two.next()?.difference)
            #expect(removed.removed.map(\.description) == ["[\(student)]"])
            try await running.stop()
        }

        @Test func aQuietResultSendsHeartbeatsAndNoQuery() async throws {
            let database = try TestDatabase.create()
            let running = try await Engine(database, [Self.enrolmentsByCourse], heartbeatInterval: .milliseconds(100))
            var updates = try await running.engine.subscribe("enrolments_by_course").makeAsyncIterator()
            guard case .update? = try await updates.nextDelivery() else { Issue.record("the first delivery is the result"); return }
            for _ in 0..<3 {
                guard case .heartbeat? = try await updates.nextDelivery() else { Issue.record("a quiet result sends heartbeats"); return }
            }
            #expect(running.evaluations == 1)
            try database.execute("INSERT INTO course (short_code, name) VALUES ('HB', 'Heartbeat')")
            var delivery = try await updates.nextDelivery()
            while case .heartbeat? = delivery { delivery = try await updates.nextDelivery() }
            guard case .update(let update)? = delivery else { Issue.record("the change arrives"); return }
            #expect(update.difference?.added.count == 1)
            try await running.stop()
        }

        @Test func aQueryIsCheckedAndItsTablesComeFromItsPlan() throws {
            let database = try TestDatabase.create()
            let connection = try database.connect()
            try connection.execute("CREATE VIEW enrolment AS SELECT s.first_name, e.course_id FROM student s JOIN enrols_in e ON e.student_id = s.id")
            let inspection = try LiveQueryRunner.inspect(Self.enrolmentsByCourse, on: connection)
            #expect(inspection.tables == [TableName(name: "course"), TableName(name: "enrols_in")])
            #expect(inspection.columns == ["course_id", "name", "enrolled"])
            let throughView = LiveQueryDefinition(name: "v", sql: "select course_id, count(*) from enrolment where course_id = $1 group by 1", key: ["course_id"], parameters: ["c"])
            #expect(try LiveQueryRunner.inspect(throughView, on: connection).tables == [TableName(name: "enrols_in"), TableName(name: "student")])
            let undeclared = LiveQueryDefinition(name: "u", sql: Self.studentsOf.sql, key: ["id"])
            #expect(throws: LibpqError.self) { try LiveQueryRunner.inspect(undeclared, on: connection) }
            let badKey = LiveQueryDefinition(name: "k", sql: Self.enrolmentsByCourse.sql, key: ["id"])
            let refusal = #expect(throws: LibpqError.self) { try LiveQueryRunner.inspect(badKey, on: connection) }
            #expect(refusal?.message.contains("no result column id") == true)
            #expect(throws: LibpqError.self) { try LiveQueryRunner.inspect(LiveQueryDefinition(name: "p", sql: "selec 1", key: ["a"]), on: connection) }
            #expect(try connection.execute("SELECT count(*) FROM pg_prepared_statements").rows == [["0"]], "nothing is left prepared")
        }

        /// Writers change the query's table (multi-row transactions,
        /// updates, deletes, rollbacks) while subscribers come and go. Every
        /// result a subscriber holds must equal the table as the snapshot it
        /// names saw it, computed from the writers' own log of what committed.
        @Test func everyResultIsTheTableAsItsSnapshotSawIt() async throws {
            let database = try TestDatabase.create()
            try database.execute("CREATE TABLE item (id int PRIMARY KEY, value int NOT NULL)")
            try Installer.install(on: database.connect())
            let items = LiveQueryDefinition(name: "items", sql: "select id, value from item", key: ["id"])
            let running = try await Engine(database, [items])
            let logs = Recorded<[[Committed]]>(Array(repeating: [], count: 3))
            let observed = Recorded<[Observation]>([])

            let subscribers = Task {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for subscriber in 0..<6 {
                        group.addTask {
                            // Each subscriber joins late by a different amount, and half leave early.
                            try await Task.sleep(for: .milliseconds(40 * subscriber))
                            var rows: [String: String] = [:]
                            var seen = 0
                            for try await update in try await running.engine.subscribe("items") {
                                Self.apply(update, to: &rows, key: "id")
                                let held = rows
                                observed.withLock { $0.append(Observation(snapshot: update.result.snapshot, rows: held)) }
                                seen += 1
                                if subscriber % 2 == 1, seen == 4 { break }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<3 {
                    group.addTask {
                        let connection = try database.connect()
                        var generator = SystemRandomNumberGenerator()
                        var present = Set<Int>()
                        for _ in 0..<40 {
                            var writes: [Write] = []
                            try connection.execute("BEGIN")
                            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                                let id = writer * 1000 + Int.random(in: 0..<12, using: &generator)
                                let value = Int.random(in: 0..<1000, using: &generator)
                                if present.contains(id) {
                                    if Bool.random(using: &generator) {
                                        try connection.execute("UPDATE item SET value = \(value) WHERE id = \(id)")
                                        writes.append(Write(id: id, value: value))
                                    } else {
                                        try connection.execute("DELETE FROM item WHERE id = \(id)")
                                        writes.append(Write(id: id, value: nil))
                                        present.remove(id)
                                    }
                                } else {
                                    try connection.execute("INSERT INTO item VALUES (\(id), \(value))")
                                    writes.append(Write(id: id, value: value))
                                    present.insert(id)
                                }
                            }
                            let transactionID = UInt64(try connection.execute("SELECT txid_current()").rows[0][0] ?? "") ?? 0
                            if Int.random(in: 0..<6, using: &generator) == 0 {
                                try connection.execute("ROLLBACK")
                                for write in writes {
                                    if write.value == nil { present.insert(write.id) }
                                }
                                let written = Set(try connection.execute("SELECT id FROM item WHERE id / 1000 = \(writer)").rows.compactMap { $0[0].flatMap { Int($0) } })
                                present = written
                            } else {
                                try connection.execute("COMMIT")
                                logs.withLock { $0[writer].append(Committed(transactionID: transactionID, writes: writes)) }
                            }
                            try await Task.sleep(for: .milliseconds(Int.random(in: 0..<15, using: &generator)))
                        }
                    }
                }
                try await group.waitForAll()
            }
            // The subscribers that stay converge on the table as it ends.
            let final = try Self.queryNow(database, items, key: "id")
            try await waitFor(seconds: 20) {
                observed.withLock { all in all.contains { $0.rows == final } }
            } failure: { "no subscriber reached the final table" }
            subscribers.cancel()

            let committed = logs.withLock { $0 }
            let results = observed.withLock { $0 }
            #expect(results.count > 10, "the writers made the query run again and again")
            for (snapshot, rows) in results.map({ ($0.snapshot, $0.rows) }) {
                var table: [Int: Int] = [:]
                for log in committed {
                    for transaction in log where snapshot.isVisible(transaction.transactionID) {
                        for write in transaction.writes { table[write.id] = write.value }
                    }
                }
                let expected = Dictionary(uniqueKeysWithValues: table.map { ("\($0.key)", #"{"id":\#($0.key),"value":\#($0.value)}"#) })
                #expect(rows == expected, "the result of snapshot \(snapshot) is not the table it saw")
            }
            try await running.stop()
        }

        /// 150 sets of parameters from one subscriber were 150 evaluations on every change, and a
        /// bystander's result came 1.2 s late: one caller follows at most its limit of sets at once;
        /// a set already followed, or one freed, is open to it.
        @Test func oneCallerFollowsAtMostItsShareOfParameterSets() async throws {
            let database = try TestDatabase.create()
            let config = FileManager.default.temporaryDirectory.appending(path: "pgherald-queries-\(UUID().uuidString.prefix(8)).yaml").path
            try """
                database: "\(database.connInfo)"
                queries:
                  students_of:
                    sql: \(Self.studentsOf.sql)
                    key: [id]
                    params: [course_id]
                    max_parameter_sets_per_user: 2
                """.write(toFile: config, atomically: true, encoding: .utf8)
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])
            let one = try await RawStream(socketPath: daemon.socketPath, path: "/queries/students_of?course_id=1&format=ndjson")
            var two: RawStream? = try await RawStream(socketPath: daemon.socketPath, path: "/queries/students_of?course_id=2&format=ndjson")
            let again = try await RawStream(socketPath: daemon.socketPath, path: "/queries/students_of?course_id=1&format=ndjson")
            for stream in [one, two!, again] { try await stream.waitForLines(1) }
            let third = try await daemon.get("/queries/students_of?course_id=3")
            #expect(third.status == 429, "\(third)")
            #expect(third.body.contains("sets of parameters of query students_of, its limit (queries.students_of.max_parameter_sets_per_user)"), "\(third.body)")
            // Its stream ends: the set is free.
            two = nil
            // Asked by curl, which reports the status of a stream it reads for a second and then leaves.
            func status() async throws -> String {
                try await DaemonProcess(
                    ["-s", "--unix-socket", daemon.socketPath, "--max-time", "1", "-o", "/dev/null", "-w", "%{http_code}",
                     "http://localhost/queries/students_of?course_id=3&format=ndjson"],
                    executable: URL(fileURLWithPath: "/usr/bin/curl")
                ).finish(within: 10).stdout
            }
            try await waitFor { try await status() == "200" } failure: { "the freed set was not open to its caller" }
            _ = (one, again)
            _ = try await daemon.stop()
        }

        @Test func theSocketAndTheTypedClientServeALiveQuery() async throws {
            let database = try TestDatabase.create()
            let config = FileManager.default.temporaryDirectory.appending(path: "pgherald-queries-\(UUID().uuidString.prefix(8)).yaml").path
            try """
                database: "\(database.connInfo)"
                queries:
                  enrolments_by_course:
                    sql: \(Self.enrolmentsByCourse.sql) order by c.id
                    key: [course_id]
                  students_of:
                    sql: \(Self.studentsOf.sql)
                    key: [id]
                    params: [course_id]
                """.write(toFile: config, atomically: true, encoding: .utf8)
            let checked = try await DaemonProcess(["check-config", config, "--connect"]).finish()
            #expect(checked.status == 0, "\(checked.stderr)")
            #expect(checked.stdout.contains("# query enrolments_by_course: reads public.course, public.enrols_in"), "\(checked.stdout)")
            let daemon = try await SocketDaemon(database: database, arguments: ["--config", config])

            #expect(try await daemon.get("/queries/nope").status == 404)
            #expect(try await daemon.get("/queries/students_of").status == 400)
            #expect(try await daemon.get("/queries/students_of?course_id=1&x=2").status == 400)
            // Values the query's types refuse are the subscriber's mistake: 400, and no error of the query's in /stats.
            let notANumber = try await daemon.get("/queries/students_of?course_id=x")
            #expect(notANumber.status == 400 && notANumber.body.contains("bad_parameters"), "\(notANumber)")
            #expect(try await daemon.get("/stats").body.contains("invalid input syntax") == false)

            var live = daemon.client.liveQuery("enrolments_by_course", as: CourseEnrolment.self).makeAsyncIterator()
            let first = try #require(try await live.next())
            #expect(first.map(\.courseId) == first.map(\.courseId).sorted(), "in the query's order")
            #expect(first.count == Int(try database.execute("SELECT count(*) FROM course").rows[0][0] ?? ""))
            let enrolledInTwo = try #require(first.first { $0.courseId == 2 }).enrolled
            let student = try #require(try database.execute("INSERT INTO student (first_name, last_name) VALUES ('Ada', 'L') RETURNING id").rows.first?.first ?? nil)
            try database.execute("INSERT INTO enrols_in VALUES ($1, 2)", parameters: [student])
            let second = try #require(try await live.next())
            #expect(second.first { $0.courseId == 2 }?.enrolled == enrolledInTwo + 1)
            #expect(second.count == first.count)

            // The view model of the seed apps, with no refresh code.
            let model = await LiveQueryModel(client: daemon.client, query: "students_of", parameters: ["course_id": "2"], as: Student.self)
            let following = Task { await model.run() }
            try await waitFor { await model.updateCount == 1 }
            #expect(await model.rows.contains { $0.firstName == "Ada" })
            try database.execute("UPDATE student SET first_name = 'Ada Lovelace' WHERE id = $1", parameters: [student])
            try await waitFor { await model.rows.contains { $0.firstName == "Ada Lovelace" } }
            #expect(await model.updateCount == 2)
            following.cancel()
            let unknown = await LiveQueryModel(client: daemon.client, query: "nope", as: Student.self)
            await unknown.run()
            #expect(await (unknown.failure as? HeraldClientError)?.code == .rejected)

            let statistics = try await daemon.statistics()
            #expect(statistics.queries?["enrolments_by_course"]?.subscribers == 1)
            #expect(statistics.queries?["students_of"]?.parameterSets == 1)
            #expect((statistics.queries?["enrolments_by_course"]?.evaluations ?? 0) >= 2)
            try await daemon.stop()
        }
    }
}
