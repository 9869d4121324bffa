import Foundation
@testable import Herald
@testable import HeraldAPI
@testable import HeraldConfiguration
import HeraldSettings
import Testing

@Suite struct LiveQuerySchedulerTests {
    let start = ContinuousClock.now
    let configuration = RefreshCoalescer.Configuration(quietPeriod: .milliseconds(10), maximumDelay: .milliseconds(100))

    func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    /// A snapshot in which every transaction below `xmax` has committed.
    func snapshot(below xmax: UInt64, inProgress: Set<UInt64> = []) -> TransactionSnapshot {
        TransactionSnapshot(xmin: inProgress.min() ?? xmax, xmax: xmax, inProgress: inProgress)
    }

    @Test func aBurstOfChangesRunsTheQueryOnce() {
        var scheduler = LiveQueryScheduler(configuration: configuration)
        #expect(scheduler.start() == .evaluate)
        #expect(scheduler.evaluated(snapshot: snapshot(below: 100), at: at(1)) == .none)
        #expect(scheduler.changeArrived(transactionID: 100, at: at(2)) == .startTimer(at(12)))
        for millisecond in 3...8 { #expect(scheduler.changeArrived(transactionID: 100, at: at(millisecond)) == .none) }
        #expect(scheduler.timerFired(at: at(12)) == .startTimer(at(18)))
        #expect(scheduler.timerFired(at: at(18)) == .evaluate)
        #expect(scheduler.evaluated(snapshot: snapshot(below: 101), at: at(20)) == .none)
        #expect(scheduler.newestIncluded == 100)
    }

    @Test func aChangeTheResultAlreadyIncludesDoesNotRunItAgain() {
        var scheduler = LiveQueryScheduler(configuration: configuration)
        _ = scheduler.start()
        _ = scheduler.evaluated(snapshot: snapshot(below: 100, inProgress: [95]), at: at(1))
        #expect(scheduler.changeArrived(transactionID: 90, at: at(2)) == .none, "committed before the snapshot: in the result")
        #expect(scheduler.changeArrived(transactionID: 95, at: at(3)) == .startTimer(at(13)), "in progress at the snapshot: not in it")
    }

    @Test func aChangeThatArrivesWhileTheQueryRunsIsCheckedAgainstItsSnapshot() {
        var scheduler = LiveQueryScheduler(configuration: configuration)
        _ = scheduler.start()
        #expect(scheduler.changeArrived(transactionID: 50, at: at(1)) == .none)
        #expect(scheduler.evaluated(snapshot: snapshot(below: 60), at: at(2)) == .none, "the run saw 50 committed")
        #expect(scheduler.newestIncluded == 50)
        #expect(scheduler.timerFired(at: at(100)) == .none)

        _ = scheduler.changeArrived(transactionID: 70, at: at(3))
        #expect(scheduler.timerFired(at: at(13)) == .evaluate)
        #expect(scheduler.changeArrived(transactionID: 71, at: at(14)) == .none)
        #expect(scheduler.evaluated(snapshot: snapshot(below: 71), at: at(15)) == .startTimer(at(25)), "71 committed after the snapshot")
        #expect(scheduler.timerFired(at: at(25)) == .evaluate)
    }

    @Test func aChangeOfUnknownTransactionAlwaysRunsItAgain() {
        var scheduler = LiveQueryScheduler(configuration: configuration)
        _ = scheduler.start()
        _ = scheduler.evaluated(snapshot: snapshot(below: 100), at: at(1))
        #expect(scheduler.changeArrived(transactionID: nil, at: at(2)) == .startTimer(at(12)))
    }

    @Test func anUnreachableDatabaseIsRetriedAndTheRetryReadsEverything() {
        var scheduler = LiveQueryScheduler(configuration: configuration)
        _ = scheduler.start()
        #expect(scheduler.changeArrived(transactionID: 7, at: at(1)) == .none)
        #expect(scheduler.failed(at: at(2), retryAt: at(1002)) == .retry(at(1002)))
        #expect(scheduler.changeArrived(transactionID: 8, at: at(3)) == .none, "the retry reads it")
        #expect(scheduler.retryDue() == .evaluate)
        #expect(scheduler.retryDue() == .none)
        #expect(scheduler.evaluated(snapshot: snapshot(below: 10), at: at(1003)) == .none)
    }

    @Test func startWhileRunningDoesNotRunTwice() {
        var scheduler = LiveQueryScheduler(configuration: configuration)
        #expect(scheduler.start() == .evaluate)
        #expect(scheduler.start() == .none)
    }
}

@Suite struct LiveQueryResultTests {
    func rows(_ texts: String...) -> [RawJSON] {
        texts.map { text in Array(text.utf8).withUnsafeBufferPointer { try! RawJSON(validating: $0) } }
    }

    func result(_ rows: [RawJSON], version: UInt64 = 1) throws -> LiveQueryResult {
        try LiveQueryResult(
            query: "q", version: version, generation: "g", snapshot: TransactionSnapshot(xmin: 1, xmax: 1), rows: rows, keyColumns: ["id"]
        )
    }

    @Test func theDifferenceNamesRowsAddedChangedAndRemovedByKey() throws {
        let older = try result(rows(#"{"id":1,"n":"a"}"#, #"{"id":2,"n":"b"}"#, #"{"id":3,"n":"c"}"#))
        let newer = try result(rows(#"{"id":1,"n":"a"}"#, #"{"id":3,"n":"C"}"#, #"{"id":4,"n":"d"}"#), version: 2)
        let difference = newer.difference(from: older)
        #expect(difference.added.map(\.description) == [#"{"id":4,"n":"d"}"#])
        #expect(difference.changed.map(\.description) == [#"{"id":3,"n":"C"}"#])
        #expect(difference.removed.map(\.description) == ["[2]"])
        #expect(newer.difference(from: newer).isEmpty)
        #expect(newer.token == "g.2")
    }

    @Test func aKeyThatIsNotUniqueOrNotThereIsRefused() {
        #expect(throws: LiveQueryError.self) { try result(rows(#"{"id":1}"#, #"{"id":1}"#)) }
        let missing = #expect(throws: LiveQueryError.self) { try result(rows(#"{"other":1}"#)) }
        #expect(missing?.message.contains("no result column id") == true)
    }

    @Test func parametersAreBoundByNameInDeclaredOrder() throws {
        let definition = LiveQueryDefinition(name: "q", sql: "select $1, $2", key: ["a"], parameters: ["course", "term"])
        #expect(try definition.boundValues(["term": "2026", "course": "7"]) == ["7", "2026"])
        #expect(throws: LiveQueryError.self) { try definition.boundValues(["course": "7"]) }
        let unknown = #expect(throws: LiveQueryError.self) { try definition.boundValues(["course": "7", "term": "1", "x": "1"]) }
        #expect(unknown?.code == .badParameters)
        // A NUL would cut the value short on its way through libpq: refused, not truncated.
        let truncated = #expect(throws: LiveQueryError.self) { try definition.boundValues(["course": "7\u{0}; 8", "term": "1"]) }
        #expect(truncated?.code == .badParameters && truncated?.message.contains("NUL") == true)
    }

    @Test func aQueryIsGrantedByNameAndOnlyWithEveryTableItReads() {
        let course = TableName(name: "course")
        let enrolment = TableName(name: "enrols_in")
        let granted = AccessScope.grants([AccessGrant(tables: [TablePattern(parsing: "public.*")!], queries: ["enrolments_*"])], rules: ["app"])
        #expect(granted.refusal(ofQuery: "enrolments_by_course", reading: [course, enrolment]) == nil)
        #expect(granted.refusal(ofQuery: "other", reading: [course]) != nil)
        let narrow = AccessScope.grants([AccessGrant(tables: [TablePattern(parsing: "public.course")!], queries: ["*"])], rules: ["app"])
        #expect(narrow.refusal(ofQuery: "enrolments_by_course", reading: [course, enrolment])?.contains("enrols_in") == true)
        let predicate = ColumnPredicate(column: "id", comparison: .eq, operand: .value("1"))
        let rowsWithheld = AccessScope.grants([AccessGrant(predicates: [predicate], queries: ["*"])], rules: ["app"])
        #expect(rowsWithheld.refusal(ofQuery: "q", reading: [course]) != nil, "a grant with row conditions would leak through a query")
        #expect(AccessScope.everything.refusal(ofQuery: "q", reading: [course]) == nil)
    }
}

@Suite struct LiveQueryConfigurationTests {
    func load(_ text: String) async throws(ConfigurationError) -> DaemonConfiguration {
        let file = FileManager.default.temporaryDirectory.appending(path: "pgherald-queries-\(UUID().uuidString).yaml")
        try? text.write(to: file, atomically: true, encoding: .utf8)
        return try await DaemonConfiguration.load(from: ConfigurationSources(file: file.path, fileRequired: true, environment: [:]))
    }

    @Test func queriesAreReadWithTheirKeyParametersAndTables() async throws {
        let configuration = try await load("""
            queries:
              enrolments_by_course:
                sql: select c.id as course_id, count(e.*) as enrolled from course c left join enrols_in e on e.course_id = c.id group by c.id
                key: [course_id]
              students_of:
                sql: select s.id from student s join enrols_in e on e.student_id = s.id where e.course_id = $1::int
                key: id
                params: [course_id]
                tables: [student, public.enrols_in]
            """)
        let definitions = try #require(configuration[LiveQueryOutput.self]).definitions.sorted { $0.name < $1.name }
        #expect(definitions.map(\.name) == ["enrolments_by_course", "students_of"])
        #expect(definitions[0].key == ["course_id"] && definitions[0].tables == nil && definitions[0].parameters.isEmpty)
        #expect(definitions[1].key == ["id"] && definitions[1].parameters == ["course_id"])
        #expect(definitions[1].tables == [TableName(name: "student"), TableName(name: "enrols_in")])
    }

    @Test(arguments: [
        ("queries:\n  q:\n    key: [id]\n", "queries.q.sql"),
        ("queries:\n  q:\n    sql: select 1 as id\n", "queries.q.key"),
        ("queries:\n  'bad name':\n    sql: select 1 as id\n    key: [id]\n", "queries.bad name"),
        ("queries:\n  q:\n    sql: select 1 as id\n    key: [id]\n    params: [1x]\n", "queries.q.params"),
        ("queries:\n  q:\n    sql: select 1 as id\n    key: [id]\n    tables: ['a.b.c']\n", "queries.q.tables"),
        ("queries:\n  q:\n    sql: select 1 as id\n    key: [id]\n    refresh: 1s\n", "queries.q.refresh"),
    ])
    func aBadQuerySettingNamesItsKey(_ text: String, _ key: String) async {
        let error = await #expect(throws: ConfigurationError.self) { _ = try await load(text) }
        #expect(error?.description.contains(key) == true, "\(String(describing: error))")
    }

    @Test func accessRulesGrantQueries() async throws {
        let configuration = try await load("""
            access:
              app:
                user: "60001"
                tables: [public.*]
                queries: [enrolments_*]
            """)
        #expect(configuration.access?.rules.first?.grant.queries == ["enrolments_*"])
    }
}
