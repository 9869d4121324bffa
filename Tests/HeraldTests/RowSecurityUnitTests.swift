@testable import Herald
@testable import HeraldPostgres
import HeraldRealtime
import Testing

/// The pure parts of row-level security: identities, what an event becomes
/// for a subscriber, the policy condition, the check script, the scope.
@Suite struct RowSecurityUnitTests {
    let todo = TableName(schema: "public", name: "todo")

    func event(_ operation: Operation, new: JSONObject? = nil, old: JSONObject? = nil) -> Event {
        Event(
            id: "7", operation: operation, table: todo, primaryKey: ["id": .number(JSONNumber(Int64(1)))], new: new, old: old,
            transactionID: "9", at: "2026-11-27T12:00:00.000000Z"
        )
    }

    let alices: JSONObject = ["id": .number(JSONNumber(Int64(1))), "owner": .string("alice"), "secret": .string("s")]
    let bobs: JSONObject = ["id": .number(JSONNumber(Int64(1))), "owner": .string("bob"), "secret": .string("t")]

    @Test func oneUsersTokensAreOneCohortWhateverTheirDatesButNotAcrossSessions() {
        let first = RowSecurityIdentity(role: "authenticated", claims: [
            "sub": .string("u1"), "exp": .number(JSONNumber(Int64(100))), "session_id": .string("a"), "role": .string("authenticated"),
        ])
        let refreshed = RowSecurityIdentity(role: "authenticated", claims: [
            "role": .string("authenticated"), "iat": .number(JSONNumber(Int64(5))), "sub": .string("u1"), "session_id": .string("a"),
            "nbf": .number(JSONNumber(Int64(1))),
        ])
        #expect(first == refreshed)
        #expect(first.claimsText == #"{"role":"authenticated","session_id":"a","sub":"u1"}"#)
        // A policy may read the session (revoked sessions, rows per device): another session is another cohort.
        let otherDevice = RowSecurityIdentity(role: "authenticated", claims: [
            "sub": .string("u1"), "session_id": .string("b"), "role": .string("authenticated"),
        ])
        #expect(first != otherDevice)
        #expect(RowSecurityIdentity(role: "r", claims: ["jti": .string("1")]) != RowSecurityIdentity(role: "r", claims: ["jti": .string("2")]))
        // Unless the operator says no policy reads it; then no policy can read it either.
        let ignoring: Set<String> = ["exp", "iat", "nbf", "session_id"]
        let merged = RowSecurityIdentity(role: "authenticated", claims: first.claims, ignoring: ignoring)
        #expect(merged == RowSecurityIdentity(role: "authenticated", claims: otherDevice.claims, ignoring: ignoring))
        #expect(merged.claimsText == #"{"role":"authenticated","sub":"u1"}"#)
        #expect(first != RowSecurityIdentity(role: "authenticated", claims: ["sub": .string("u2")]))
        #expect(first.description == "role authenticated, sub u1")
    }

    @Test func anEventShowsWhatTheSubscriberCouldSelect() throws {
        let columns: Set<String> = ["id", "owner"]
        let insert = try #require(event(.insert, new: alices).restricted(to: .init(new: true, old: false), columns: columns))
        #expect(insert.new == ["id": .number(JSONNumber(Int64(1))), "owner": .string("alice")] && !insert.jsonText.contains("secret"))
        #expect(event(.insert, new: alices).restricted(to: .init(new: false, old: false), columns: nil) == nil)
        #expect(event(.delete, old: alices).restricted(to: .init(new: false, old: false), columns: nil) == nil)

        // Out of view: the old row only, marked; into view: no old row of someone else's.
        let leaving = try #require(event(.update, new: bobs, old: alices).restricted(to: .init(new: false, old: true), columns: columns))
        #expect(leaving.leftView && leaving.new == nil && leaving.old?["owner"] == .string("alice"))
        #expect(leaving.jsonText.contains(#""left_view":true"#))
        #expect(try Event(payload: leaving.jsonText).leftView)
        let arriving = try #require(event(.update, new: bobs, old: alices).restricted(to: .init(new: true, old: false), columns: nil))
        #expect(!arriving.leftView && arriving.old == [:] && arriving.new?["owner"] == .string("bob"))
        #expect(event(.update, new: bobs, old: alices).restricted(to: .init(new: false, old: false), columns: nil) == nil)

        // A row whose key changed as it left the view shows the key the subscriber saw, never the new one.
        let rekeyed = Event(
            id: "7", operation: .update, table: todo, primaryKey: ["id": .number(JSONNumber(Int64(4242)))],
            new: ["id": .number(JSONNumber(Int64(4242))), "owner": .string("bob"), "secret": .string("t")], old: alices, transactionID: "9", at: "2026-11-27T12:00:00.000000Z"
        )
        for columns in [nil, Set(["id", "owner"])] {
            let removal = try #require(rekeyed.restricted(to: .init(new: false, old: true), columns: columns))
            #expect(removal.leftView && removal.primaryKey == ["id": .number(JSONNumber(Int64(1)))], "\(removal.jsonText)")
            #expect(!removal.jsonText.contains("4242"), "\(removal.jsonText)")
        }
        // A key column the subscriber may not select is not shown at all.
        let hiddenKey = try #require(rekeyed.restricted(to: .init(new: false, old: true), columns: ["owner"]))
        #expect(hiddenKey.primaryKey == [:] && !hiddenKey.jsonText.contains("4242"), "\(hiddenKey.jsonText)")

        // Seen whole: the event itself.
        let whole = event(.update, new: bobs, old: alices)
        #expect(whole.restricted(to: .init(new: true, old: true), columns: nil) == whole)
        let omitted = Event(id: "8", operation: .insert, table: todo, transactionID: "9", at: "x", rowDataOmitted: true)
        #expect(omitted.restricted(to: .init(new: true, old: true), columns: nil) == nil)
    }

    @Test func policiesCombineAsPostgreSQLCombinesThem() {
        #expect(TableAccess(isSelectable: true, columns: nil, checksPolicies: false).condition == .everyRow)
        #expect(TableAccess(isSelectable: true, columns: nil, checksPolicies: true, restrictive: ["a"]).condition == .noRow)
        #expect(TableAccess(isSelectable: true, columns: nil, checksPolicies: true, permissive: ["p1", "p2"], restrictive: ["r1"]).condition
            == .expression("((p1) OR (p2)) AND ((r1))"))
    }

    @Test func theScriptSaysWhichStatementIsWhoseCheck() throws {
        let alice = RowSecurityIdentity(role: "member", claims: ["sub": .string("alice")])
        let bob = RowSecurityIdentity(role: "member", claims: ["sub": .string("bob")])
        let script = try RowVisibilityScript(
            images: [todo: [RawJSON(.object(alices))]],
            cohorts: [.init(index: 0, identity: alice, conditions: [(todo, "c")]), .init(index: 3, identity: bob, conditions: [(todo, "c")])],
            quote: { "'\($0.replacingOccurrences(of: "'", with: "''"))'" }, quoteIdentifier: { "\"\($0)\"" },
            statement: { _, _ in "EXECUTE check_todo" }
        )
        #expect(script.statements == [
            .setup, .setup, .setup, .clock(after: nil),
            .cohort(0), .cohort(0), .cohort(0), .check(cohort: 0, table: todo), .cohort(0), .clock(after: 0),
            .cohort(3), .cohort(3), .cohort(3), .check(cohort: 3, table: todo), .cohort(3), .clock(after: 3),
            .setup,
        ])
        // Each cohort is judged alone: what one's policies set in the transaction is rolled back before the next.
        let bobsPart = try #require(script.sql.range(of: #"'{"sub":"bob"}'"#))
        #expect(script.sql[..<bobsPart.lowerBound].hasSuffix("SAVEPOINT pgherald_cohort;\nSET LOCAL ROLE \"member\";\nSELECT set_config('request.jwt.claims', "))
        #expect(script.sql.components(separatedBy: "ROLLBACK TO SAVEPOINT pgherald_cohort;").count == 3)
        #expect(script.sql.hasPrefix("BEGIN READ ONLY;") && script.sql.hasSuffix("ROLLBACK"))
        #expect(script.sql.contains(#"SET LOCAL ROLE "member";"#) && script.sql.contains(#"'{"sub":"bob"}'"#))
        #expect(script.sql.components(separatedBy: ";\n").count == script.statements.count)
        #expect(RowVisibilityScript.setting(for: todo) == RowVisibilityScript.setting(for: TableName(schema: "public", name: "todo")))
        #expect(RowVisibilityScript.statementName(for: "a") != RowVisibilityScript.statementName(for: "b"))
    }

    @Test func rowSecurityNarrowsEverythingAPeerIsGranted() {
        let peer = PeerIdentity(processID: 1, userID: 1001, groupIDs: [2000])
        let identity = RowSecurityIdentity(role: "member", claims: ["sub": .string("alice")])
        let everything = AccessPolicy.Rule(name: "all", principal: .group(id: 2000, name: nil), grant: AccessGrant())
        let family = AccessPolicy.Rule(name: "family", principal: .user(id: 1001, name: nil), grant: AccessGrant(rowSecurity: identity))
        let policy = AccessPolicy(rules: [everything, family], daemonUserID: 999)
        let scope = policy.scope(for: peer)
        #expect(scope != .everything && scope.rowSecurity == identity)
        #expect(AccessPolicy(rules: [everything], daemonUserID: 999).scope(for: peer) == .everything)
        // Two identities at once: refused, not one of them picked.
        let other = AccessPolicy.Rule(
            name: "other", principal: .group(id: 2000, name: nil), grant: AccessGrant(rowSecurity: RowSecurityIdentity(role: "member", claims: ["sub": .string("bob")]))
        )
        #expect(AccessPolicy(rules: [family, other], daemonUserID: 999).scope(for: peer) == .grants([], rules: ["family", "other"]))
        // A query that runs as its subscriber needs its name, not the tables.
        let queries = AccessScope.grants([AccessGrant(queries: ["mine"], rowSecurity: identity)], rules: ["family"])
        #expect(queries.refusal(ofQuery: "mine", reading: [todo], runsAsSubscriber: true) == nil)
        #expect(queries.refusal(ofQuery: "mine", reading: [todo]) != nil)
        #expect(queries.refusal(ofQuery: "theirs", reading: [], runsAsSubscriber: true) != nil)
    }

    @Test func aTokenOfARoleUnderRowSecurityCarriesItsClaims() throws {
        let tokens = RealtimeCredentials.Tokens(
            secret: Array("a-jwt-secret-of-enough-length-0123456789".utf8),
            roles: ["authenticated": AccessGrant(rowSecurity: RowSecurityIdentity(role: "authenticated")), "anon": AccessGrant()]
        )
        let credentials = RealtimeCredentials(tokens: tokens)
        let user = try credentials.identify(tokens.sign(claims: ["role": .string("authenticated"), "sub": .string("u1")]), now: 0)
        #expect(user.scope.rowSecurity == RowSecurityIdentity(role: "authenticated", claims: ["role": .string("authenticated"), "sub": .string("u1")]))
        let anonymous = try credentials.identify(tokens.sign(claims: ["role": .string("anon")]), now: 0)
        #expect(anonymous.scope == .everything && anonymous.scope.rowSecurity == nil)
    }
}
