import Herald
import HeraldConfiguration
import HeraldSupabase
import Testing

extension ConfigurationTests {
    /// Private broadcast topics are granted by `topics:` in an access rule, a realtime key or a JWT role.
    @Test func topicsAreGrantedByRulesKeysAndRoles() async throws {
        let secret = directory.appending(path: "jwt").path
        try "a-jwt-secret-of-enough-length-0123456789\n".write(toFile: secret, atomically: true, encoding: .utf8)
        let configuration = try await load("""
            access:
              alice:
                user: "60001"
                tables: [public.orders]
                topics: [room-*, lobby]
            realtime:
              keys:
                web:
                  key: abcdefghijklmnopqrstuvwx
                  tables: [public.orders]
                  topics: [chat-*]
              jwt:
                secret_file: \(secret)
                roles:
                  anon:
                    tables: [public.orders]
                    topics: [news]
            """)
        let alice = try #require(configuration.access?.rules.first?.grant)
        #expect(alice.covers(topic: "room-7") && alice.covers(topic: "lobby") && !alice.covers(topic: "lobby-2"))
        let scope = AccessScope.grants([alice], rules: ["alice"])
        #expect(scope.covers(topic: "room-1") && !scope.covers(topic: "secret") && AccessScope.everything.covers(topic: "secret"))
        let realtime = try #require(configuration[RealtimeEndpoint.self])
        #expect(realtime.credentials.keys.first?.grant.covers(topic: "chat-9") == true)
        #expect(realtime.credentials.tokens?.roles["anon"]?.covers(topic: "news") == true)
        #expect(realtime.broadcastMaximumBytes == 65_536 && realtime.broadcastMaximumPerSecond == 100)
        let bad = try await rejection("access:\n  bob:\n    user: \"60002\"\n    topics: [\"room *\"]\n")
        #expect(bad.key == "access.bob.topics")
        let prefixed = try await rejection("access:\n  bob:\n    user: \"60002\"\n    topics: [realtime:room]\n")
        #expect(prefixed.key == "access.bob.topics" && prefixed.reason.contains("without realtime:"))
    }

    @Test func accessRulesAreReadByUserOrGroupNameOrId() async throws {
        let configuration = try await load("""
            access:
              operators:
                group: root
              alice:
                user: "60001"
                tables: [public.orders, "public.order_*"]
                ops: INSERT,UPDATE
                where: tenant_id.eq.7
              reporting:
                group: 60100
                schemas: [reporting, "tenant_*"]
            """)
        let policy = try #require(configuration.access)
        #expect(policy.rules.map(\.name) == ["operators", "alice", "reporting"])
        #expect(policy.rules[0].principal == .group(id: 0, name: "root"))
        #expect(policy.rules[0].grant.isUnrestricted)
        let alice = policy.rules[1]
        #expect(alice.principal == .user(id: 60001, name: nil))
        #expect(alice.grant.operations == [.insert, .update])
        #expect(alice.grant.predicates.count == 1)
        #expect(alice.grant.covers(TableName(name: "order_lines")) && !alice.grant.covers(TableName(name: "students")))
        #expect(policy.rules[2].grant.covers(TableName(schema: "tenant_9", name: "x")))
        #expect(!configuration.warnings.contains { $0.contains("no access section") })
        #expect(configuration.rendered.contains("access.alice.tables: public.orders, public.order_*"))
    }

    @Test func withoutAnAccessSectionCheckConfigWarns() async throws {
        let configuration = try await load("name: x\n")
        #expect(configuration.access == nil)
        #expect(configuration.warnings.contains { $0.contains("no access section") })
        let empty = try await load("access: {}\n")
        #expect(empty.access?.rules == [])
    }

    @Test func badAccessRulesAreRefusedWithTheKey() async throws {
        var error = try await rejection("access:\n  a:\n    tables: [x]\n")
        #expect(error.key == "access.a.user" && error.reason.contains("user or a group"))
        error = try await rejection("access:\n  a:\n    user: root\n    group: root\n")
        #expect(error.key == "access.a.group")
        error = try await rejection("access:\n  a:\n    user: no-such-user-pgherald\n")
        #expect(error.key == "access.a.user" && error.reason.contains("no user named"))
        error = try await rejection("access:\n  a:\n    group: no-such-group-pgherald\n")
        #expect(error.key == "access.a.group")
        error = try await rejection("access:\n  a:\n    user: root\n    tables: [a.b.c]\n")
        #expect(error.key == "access.a.tables" && error.source.hasSuffix("line 4"))
        error = try await rejection("access:\n  a:\n    user: root\n    ops: UPSERT\n")
        #expect(error.key == "access.a.ops")
        error = try await rejection("access:\n  a:\n    user: root\n    where: tenant_id.between.1\n")
        #expect(error.key == "access.a.where")
        error = try await rejection("access:\n  a:\n    user: root\n    table: x\n")
        #expect(error.key == "access.a.table" && error.reason.contains("known: user, group"))
    }
}
