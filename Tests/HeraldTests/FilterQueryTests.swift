import Testing
@testable import Herald

@Suite struct FilterQueryTests {
    @Test func parsesEveryParameterKind() throws {
        let filter = try FilterQuery.parse([
            ("table", "course,school.student"), ("table", "enrols_in"),
            ("op", "insert,UPDATE"), ("op", "Delete"),
            ("where", "name.eq.Drama"), ("where", "id.in.(1,2,\"3,4\")"), ("where", "teacher.is.null"),
        ])
        #expect(filter.tables == [TableName(name: "course"), TableName(schema: "school", name: "student"), TableName(name: "enrols_in")])
        #expect(filter.operations == [.insert, .update, .delete])
        #expect(filter.predicates == [
            ColumnPredicate(column: "name", comparison: .eq, operand: .value("Drama")),
            ColumnPredicate(column: "id", comparison: .in, operand: .list(["1", "2", "3,4"])),
            ColumnPredicate(column: "teacher", comparison: .is, operand: .null),
        ])
    }

    @Test func emptyQueryMeansEverything() throws {
        #expect(try FilterQuery.parse([]) == .all)
    }

    @Test func valuesMayContainDotsAndUnicode() throws {
        let filter = try FilterQuery.parse([("where", "price.gte.10.50"), ("where", "name.eq.Zoë ☕.x")])
        #expect(filter.predicates.map(\.operand) == [.value("10.50"), .value("Zoë ☕.x")])
    }

    @Test func roundTripsThroughQueryItems() throws {
        let filter = EventFilter(
            tables: [TableName(name: "course"), TableName(schema: "s", name: "t")],
            operations: [.delete, .truncate],
            predicates: [
                ColumnPredicate(column: "name", comparison: .in, operand: .list(["a,b", "q\"uote", "back\\slash", ""])),
                ColumnPredicate(column: "n", comparison: .lt, operand: .value("3")),
                ColumnPredicate(column: "flag", comparison: .is, operand: .true),
            ]
        )
        #expect(try FilterQuery.parse(FilterQuery.queryItems(for: filter)) == filter)
    }

    @Test(arguments: [
        ("table", ""), ("table", "a,,b"), ("table", "a.b.c"), ("table", ".x"), ("table", "x."),
        ("table", String(repeating: "t", count: 64)), ("table", "bad\u{0}name"), ("table", "new\nline"),
        ("op", "UPSERT"), ("op", ""), ("op", "insert,"),
        ("where", "name"), ("where", "name.eq"), ("where", ".eq.x"), ("where", "name.between.x"),
        ("where", "name.is.maybe"), ("where", "id.in.1,2"), ("where", "id.in.(1,\"2)"), ("where", "id.in.(\"a\"b)"),
        ("where", "id.in.(1,2\\"), ("where", "n.eq." + String(repeating: "9", count: 5000)),
        ("where", String(repeating: "c", count: 100) + ".eq.1"),
        ("where", "col\u{7}.eq.1"), ("verbose", "1"), ("tabel", "course"),
    ])
    func rejectsMalformedAndHostileInput(name: String, value: String) {
        #expect(throws: FilterError.self) { try FilterQuery.parse([(name, value)]) }
    }

    @Test func errorsNameTheParameterAndStayShort() {
        #expect {
            try FilterQuery.parse([("where", "name.between." + String(repeating: "x", count: 900))])
        } throws: { error in
            guard let error = error as? FilterError else { return false }
            return error.parameter == "where" && error.code == .malformed && error.message.count < 200
        }
        #expect(throws: FilterError(.unknownParameter, parameter: "tabel", "unknown parameter (known: table, op, where, topic)")) {
            try FilterQuery.parse([("tabel", "course")])
        }
    }

    @Test func tooManyConditionsAreRefused() {
        let items = (0...FilterQuery.maximumPredicates).map { (name: "where", value: "c\($0).eq.1") }
        #expect(throws: FilterError.self) { try FilterQuery.parse(items) }
        let tables = (0...FilterQuery.maximumTables).map { "t\($0)" }.joined(separator: ",")
        #expect(throws: FilterError.self) { try FilterQuery.parse([("table", tables)]) }
    }

    @Test func callerParametersAreIgnored() throws {
        #expect(try FilterQuery.parse([("format", "ndjson")], ignoring: ["format"]) == .all)
    }
}

@Suite struct ColumnPredicateTests {
    let row: JSONObject = [
        "id": .number(JSONNumber(11)), "price": .number(JSONNumber(validatedText: "10.50")),
        "name": .string("Drama"), "teacher": .null, "active": .bool(true),
    ]

    func check(_ text: String) throws -> Bool {
        try FilterQuery.parsePredicate(text).matches(row)
    }

    @Test func numbersCompareNumerically() throws {
        #expect(try check("id.eq.11"))
        #expect(try check("id.eq.11.0"))
        #expect(try check("id.gt.9"))
        #expect(try !check("id.gt.100"))
        #expect(try check("id.lte.11"))
        #expect(try check("price.lt.10.6"))
        #expect(try check("price.neq.10"))
        #expect(try !check("id.eq.eleven"))
        #expect(try !check("id.neq.eleven"))
    }

    @Test func stringsBoolsAndNulls() throws {
        #expect(try check("name.eq.Drama"))
        #expect(try check("name.neq.Music"))
        #expect(try check("name.lt.E"))
        #expect(try check("name.in.(Art,Drama)"))
        #expect(try !check("name.in.(Art,Music)"))
        #expect(try check("teacher.is.null"))
        #expect(try !check("name.is.null"))
        #expect(try !check("teacher.eq.null"))
        #expect(try !check("teacher.neq.x"))
        #expect(try check("active.is.true"))
        #expect(try check("active.eq.true"))
        #expect(try !check("active.is.false"))
    }

    @Test func missingColumnsNeverMatch() throws {
        #expect(try !check("nope.eq.1"))
        #expect(try !check("nope.is.null"))
        #expect(try !FilterQuery.parsePredicate("id.eq.1").matches(nil))
    }

    @Test func deletesAreMatchedOnTheOldRow() throws {
        let filter = EventFilter(predicates: [try FilterQuery.parsePredicate("id.eq.7")])
        #expect(filter.matches(makeEvent(7, operation: .delete)))
        #expect(!filter.matches(makeEvent(8, operation: .delete)))
        #expect(!filter.matches(makeEvent(7, operation: .truncate)))
    }

    @Test(arguments: [
        ("course", TableName(schema: "public", name: "course")),
        ("school.student", TableName(schema: "school", name: "student")),
        (#""Weird Table""#, TableName(schema: "public", name: "Weird Table")),
        (#""My Schema"."a.b""#, TableName(schema: "My Schema", name: "a.b")),
        (#"public."say ""hi""""#, TableName(schema: "public", name: #"say "hi""#)),
    ])
    func parsesTableNamesPlainOrQuoted(text: String, expected: TableName) throws {
        #expect(try FilterQuery.parseTable(Substring(text)) == expected)
    }

    @Test(arguments: ["", ".", "a.", ".b", "a.b.c", #""unterminated"#, #"a"b"#, #""a"x"#])
    func rejectsMalformedTableNames(text: String) {
        #expect(throws: FilterError.self) { try FilterQuery.parseTable(Substring(text)) }
    }

    @Test func quotedNamesWithCommasAndDotsSurviveARoundTrip() throws {
        let filter = try FilterQuery.parse([
            ("table", #""a,b".c,"x.y""#),
            ("where", #""Odd.Col".eq.1.5"#),
            ("where", #"plain.in.("q,r",s)"#),
        ])
        #expect(filter.tables == [TableName(schema: "a,b", name: "c"), TableName(name: "x.y")])
        #expect(filter.predicates == [
            ColumnPredicate(column: "Odd.Col", comparison: .eq, operand: .value("1.5")),
            ColumnPredicate(column: "plain", comparison: .in, operand: .list(["q,r", "s"])),
        ])
        #expect(try FilterQuery.parse(FilterQuery.queryItems(for: filter)) == filter)
    }

    @Test func theUnknownParameterErrorListsTheCallersParametersToo() {
        #expect(throws: FilterError(.unknownParameter, parameter: "sincee", "unknown parameter (known: table, op, where, topic, format, since)")) {
            try FilterQuery.parse([("sincee", "1")], ignoring: ["format", "since"])
        }
    }
}

extension FilterQueryTests {
    /// Found by the property tests: a combining mark after a separator or a
    /// quote joined it into one character, and the parser lost the separator.
    @Test(arguments: ["col.eq.\u{301}x", "\"a\u{301}\".eq.v", "x.in.(\u{301},\"\u{301}\")", "\"\"\"\".eq.\""])
    func combiningMarksAndLoneQuotesDoNotHideSeparators(_ condition: String) throws {
        let predicate = try FilterQuery.parsePredicate(condition)
        #expect(try FilterQuery.parse([("where", predicate.description)]).predicates == [predicate])
        let table = TableName(schema: "s\u{301}.", name: "\u{301}\"")
        #expect(try FilterQuery.parse(FilterQuery.queryItems(for: EventFilter(tables: [table]))).tables == [table])
    }
}
