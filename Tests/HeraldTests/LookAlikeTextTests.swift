@testable import Herald
import Testing

/// Text that only looks alike is two things to PostgreSQL, whose `=` on
/// names, claims and (deterministic) text compares bytes; Swift's `String`
/// equality takes canonically equivalent text for one. Each place a
/// request's text meets the database's goes byte for byte.
@Suite struct LookAlikeTextTests {
    /// `zoë` with one character, and with `e` and a combining diaeresis.
    static let (composed, decomposed) = ("zo\u{00EB}", "zoe\u{0308}")
    /// `K` and the Kelvin sign, U+212A, which decomposes to it.
    static let (letter, kelvin) = ("K", "\u{212A}")

    @Test func swiftTakesThemForOne() {
        #expect(Self.composed == Self.decomposed && Self.letter == Self.kelvin)
    }

    @Test func usersWhoseSubOnlyLooksAlikeAreTwoCohorts() {
        let first = RowSecurityIdentity(role: "member", claims: ["sub": .string(Self.decomposed)])
        let second = RowSecurityIdentity(role: "member", claims: ["sub": .string(Self.composed)])
        #expect(first != second)
        #expect(Set([first, second]).count == 2)
        #expect(RowSecurityIdentity(role: "member", claims: ["sub": .string(Self.letter)])
            != RowSecurityIdentity(role: "member", claims: ["sub": .string(Self.kelvin)]))
        #expect(first == RowSecurityIdentity(role: "member", claims: ["sub": .string("zoe\u{0308}")]))
    }

    @Test func tablesWhoseNamesOnlyLookAlikeAreTwo() {
        let tables: Set = [TableName(name: "caf\u{00E9}"), TableName(name: "cafe\u{0301}")]
        #expect(tables.count == 2)
        #expect(EventFilter(tables: [TableName(name: "caf\u{00E9}")]).matches(makeEvent(1, table: "cafe\u{0301}")) == false)
    }

    @Test func comparisonsGoByteForByteAsPostgreSQLsCCollation() {
        func holds(_ comparison: ColumnPredicate.Comparison, _ value: String, _ operand: String) -> Bool {
            ColumnPredicate(column: "body", comparison: comparison, operand: .value(operand)).matches(["body": .string(value)])
        }
        #expect(!holds(.eq, "a\u{00E9}b", "ae\u{0301}b"))
        #expect(holds(.neq, "a\u{00E9}b", "ae\u{0301}b"))
        #expect(holds(.eq, "a\u{00E9}b", "a\u{00E9}b"))
        #expect(!ColumnPredicate(column: "body", comparison: .in, operand: .list(["ab", Self.letter])).matches(["body": .string(Self.kelvin)]))
        // U+212A is E2 84 AA in UTF-8: after Z, where Swift's order puts it with K, before it.
        #expect(holds(.gt, Self.kelvin, "Z") && !holds(.lt, Self.kelvin, "b"))
        #expect(holds(.lt, "Z", "a") && holds(.gte, "abc", "abc"))
    }

    @Test func aHiddenColumnWhoseNameLooksLikeAVisibleOnesStaysHidden() throws {
        var row = JSONObject()
        row.append(key: "caf\u{00E9}", value: .string("visible"))
        row.append(key: "cafe\u{0301}", value: .string("hidden"))
        #expect(row["cafe\u{0301}"] == .string("hidden"))
        let event = Event(
            id: "1", operation: .insert, table: TableName(name: "t"), primaryKey: ["id": .number(JSONNumber(Int64(1)))],
            new: row, old: nil, transactionID: "1", at: "2026-11-30T02:00:00.000000Z"
        )
        let restricted = try #require(event.restricted(to: .init(new: true, old: false), columns: ["caf\u{00E9}"]))
        #expect(restricted.newJSON?.description.contains("hidden") == false, "\(restricted.newJSON?.description ?? "")")
        #expect(restricted.newJSON?.description.contains("visible") == true)
    }
}
