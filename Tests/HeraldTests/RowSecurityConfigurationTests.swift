import Herald
import HeraldConfiguration
import HeraldSupabase
import Testing

extension ConfigurationTests {
    /// `rls`, `role` and `claims` in access rules, realtime keys and JWT roles.
    @Test func rowSecurityIsTurnedOnPerRuleKeyAndRole() async throws {
        let secret = directory.appending(path: "jwt").path
        try "a-jwt-secret-of-enough-length-0123456789\n".write(toFile: secret, atomically: true, encoding: .utf8)
        let configuration = try await load("""
            access:
              family:
                user: "60001"
                rls: true
                role: authenticated
                claims: '{"sub": "u1", "exp": 5}'
            realtime:
              keys:
                kiosk:
                  key: abcdefghijklmnopqrstuvwx
                  rls: true
                  role: kiosk
              jwt:
                secret_file: \(secret)
                roles:
                  authenticated:
                    rls: true
                  anon:
                    tables: [public.news]
            """)
        #expect(configuration.access?.rules.first?.grant.rowSecurity == RowSecurityIdentity(role: "authenticated", claims: ["sub": .string("u1")]))
        let realtime = try #require(configuration[RealtimeEndpoint.self])
        #expect(realtime.credentials.keys.first?.grant.rowSecurity == RowSecurityIdentity(role: "kiosk"))
        #expect(realtime.credentials.tokens?.roles["authenticated"]?.rowSecurity?.role == "authenticated")
        #expect(realtime.credentials.tokens?.roles["anon"]?.rowSecurity == nil)
        #expect(configuration.rowSecurityRoles == ["authenticated", "kiosk"])

        let noRole = try await rejection("access:\n  a:\n    user: \"60002\"\n    rls: true\n")
        #expect(noRole.key == "access.a.role" && noRole.reason.contains("rls: true needs the database role"))
        let noSwitch = try await rejection("access:\n  a:\n    user: \"60002\"\n    role: authenticated\n")
        #expect(noSwitch.key == "access.a.role" && noSwitch.reason.contains("needs rls: true"))
        let notJSON = try await rejection("access:\n  a:\n    user: \"60002\"\n    rls: true\n    role: r\n    claims: sub=u1\n")
        #expect(notJSON.key == "access.a.claims")
        let fixedToken = try await rejection("""
            realtime:
              jwt:
                secret_file: \(secret)
                roles:
                  authenticated:
                    rls: true
                    role: someone
            """)
        #expect(fixedToken.key == "realtime.jwt.roles.authenticated.role" && fixedToken.reason.contains("token's own role"))
    }
}
