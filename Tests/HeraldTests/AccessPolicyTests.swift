@testable import Herald
import Testing

@Suite struct AccessPolicyTests {
    let alice = PeerIdentity(processID: 10, userID: 1001, groupIDs: [1001, 2000], userName: "alice")
    let bob = PeerIdentity(processID: 11, userID: 1002, groupIDs: [1002])

    func event(_ table: String, schema: String = "public", operation: Operation = .insert, new: JSONObject? = nil, old: JSONObject? = nil) -> Event {
        Event(
            id: "1", operation: operation, table: TableName(schema: schema, name: table),
            primaryKey: ["id": .number(JSONNumber(Int64(1)))], new: new, old: old, transactionID: "1", at: "2026-11-23T12:00:00.000000Z"
        )
    }

    func tenant(_ id: Int64) -> JSONObject {
        ["id": .number(JSONNumber(Int64(1))), "tenant_id": .number(JSONNumber(id))]
    }

    func policy(_ rules: [AccessPolicy.Rule]) -> AccessPolicy {
        AccessPolicy(rules: rules, daemonUserID: 999)
    }

    func where_(_ condition: String) throws -> [ColumnPredicate] {
        try FilterQuery.parse([("where", condition)]).predicates
    }

    @Test(arguments: [
        ("*", "anything", true), ("tenant_*", "tenant_7", true), ("tenant_*", "tenant_", true), ("tenant_*", "other", false),
        ("*_log", "audit_log", true), ("*_log", "audit_logs", false), ("a*b*c", "aXbYc", true), ("a*b*c", "acb", false),
        ("a*a", "a", false), ("course", "course", true), ("course", "courses", false),
    ])
    func namePatternsMatchWithStars(pattern: String, name: String, matches: Bool) {
        #expect(NamePattern(pattern, literal: false).matches(name) == matches)
    }

    @Test func aQuotedNameIsLiteralEvenWithAStar() throws {
        let pattern = try #require(TablePattern(parsing: #"public."odd*name""#))
        #expect(pattern.matches(TableName(name: "odd*name")))
        #expect(!pattern.matches(TableName(name: "odd_name")))
        let dotted = try #require(TablePattern(parsing: #""a.b".c"#))
        #expect(dotted.matches(TableName(schema: "a.b", name: "c")))
        #expect(TablePattern(parsing: "course")?.matches(TableName(schema: "public", name: "course")) == true)
        #expect(TablePattern(parsing: "course")?.matches(TableName(schema: "school", name: "course")) == false)
        for bad in ["a.b.c", "", "a.", #""unterminated"#, #"a"b"#] {
            #expect(TablePattern(parsing: bad) == nil, "\(bad)")
        }
    }

    @Test func rootAndTheDaemonsUserSeeEverythingAndOthersOnlyTheirRules() {
        let rules = policy([
            .init(name: "alice-courses", principal: .user(id: 1001, name: "alice"), grant: AccessGrant(tables: [TablePattern(parsing: "course")!])),
            .init(name: "staff", principal: .group(id: 2000, name: "staff"), grant: AccessGrant(tables: [.schema(NamePattern("school", literal: true))])),
        ])
        #expect(rules.scope(for: PeerIdentity(processID: 1, userID: 0, groupIDs: [0])) == .everything)
        #expect(rules.scope(for: PeerIdentity(processID: 1, userID: 999, groupIDs: [999])) == .everything)
        guard case .grants(let grants, let names) = rules.scope(for: alice) else {
            Issue.record("alice is restricted")
            return
        }
        #expect(names == ["alice-courses", "staff"] && grants.count == 2)
        #expect(rules.scope(for: bob) == .grants([], rules: []))
        #expect(rules.scope(for: alice).covers(TableName(schema: "school", name: "anything")))
        #expect(!rules.scope(for: alice).covers(TableName(name: "student")))
    }

    @Test func anUnrestrictedRuleGivesEverything() {
        let rules = policy([.init(name: "all", principal: .group(id: 2000, name: nil), grant: AccessGrant())])
        #expect(rules.scope(for: alice) == .everything)
    }

    @Test func aNamedTableOutsideTheGrantIsRefusedAndAWildcardIsNarrowed() throws {
        let scope = AccessScope.grants([AccessGrant(tables: [TablePattern(parsing: "course")!], operations: [.insert, .update])], rules: ["r"])
        #expect(throws: AccessDenied.self) { try EventFilter(tables: [TableName(name: "student")]).narrowed(to: scope) }
        #expect(throws: AccessDenied.self) { try EventFilter(tables: [TableName(name: "course"), TableName(name: "student")]).narrowed(to: scope) }
        #expect(throws: AccessDenied.self) { try EventFilter(operations: .delete).narrowed(to: scope) }
        #expect(throws: AccessDenied.self) { try EventFilter.all.narrowed(to: .grants([], rules: [])) }

        let everything = try EventFilter.all.narrowed(to: scope)
        #expect(everything.matches(event("course")))
        #expect(!everything.matches(event("student")))
        #expect(!everything.matches(event("course", operation: .delete, old: tenant(1))))
        #expect(try EventFilter.all.narrowed(to: .everything) == .all)
    }

    @Test func aRowConditionHoldsForEveryRowTheEventCarries() throws {
        let scope = AccessScope.grants([AccessGrant(predicates: try where_("tenant_id.eq.7"))], rules: ["tenant7"])
        let filter = try EventFilter.all.narrowed(to: scope)
        #expect(filter.matches(event("orders", new: tenant(7))))
        #expect(!filter.matches(event("orders", new: tenant(8))))
        #expect(filter.matches(event("orders", operation: .delete, old: tenant(7))))
        // A row moving between tenants shows neither the other's values.
        #expect(!filter.matches(event("orders", operation: .update, new: tenant(7), old: tenant(8))))
        #expect(!filter.matches(event("orders", operation: .update, new: tenant(8), old: tenant(7))))
        #expect(filter.matches(event("orders", operation: .update, new: tenant(7), old: tenant(7))))
        // No rows to check: not granted.
        #expect(!filter.matches(event("orders", operation: .truncate)))
        // The client's own conditions still apply on top.
        let own = try FilterQuery.parse([("where", "id.eq.2")]).narrowed(to: scope)
        #expect(!own.matches(event("orders", new: tenant(7))))
    }

    @Test func severalRulesAreAUnion() throws {
        let scope = AccessScope.grants([
            AccessGrant(tables: [TablePattern(parsing: "course")!]),
            AccessGrant(tables: [TablePattern(parsing: "orders")!], predicates: try where_("tenant_id.eq.7")),
        ], rules: ["a", "b"])
        let filter = try EventFilter.all.narrowed(to: scope)
        #expect(filter.matches(event("course", new: tenant(8))))
        #expect(filter.matches(event("orders", new: tenant(7))))
        #expect(!filter.matches(event("orders", new: tenant(8))))
        // Narrowing to one table keeps only the grants that cover it.
        let orders = try EventFilter(tables: [TableName(name: "orders")]).narrowed(to: scope)
        #expect(orders.access?.count == 1)
    }
}
