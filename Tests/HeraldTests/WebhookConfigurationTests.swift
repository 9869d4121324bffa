import Foundation
import Herald
import HeraldConfiguration
import HeraldWebhooks
import Testing

extension ConfigurationTests {
    static let secret = "whsec_" + Data(repeating: 42, count: 32).base64EncodedString()
    static let oldSecret = "whsec_" + Data(repeating: 24, count: 32).base64EncodedString()

    @Test func webhookEndpointsAreReadWithDefaultsFiltersAndSecrets() async throws {
        let secretFile = try file("\(Self.secret)\n\(Self.oldSecret)\n", named: "orders.secret")
        let configuration = try await load("""
            webhooks:
              orders:
                url: https://hooks.example.test/pgherald
                table: [public.orders, "Odd Table"]
                op: INSERT,UPDATE
                where:
                  - status.eq.paid
                  - amount.gt.100
                secret_file: \(secretFile)
                headers:
                  Authorization: Bearer very-secret-token
              audit:
                url: http://127.0.0.1:9000/
                secret: \(Self.secret)
                ordered: true
                timeout: 2s
                max_attempts: 3
                max_age: 1h
                concurrency: 4
            """)
        #expect((configuration[WebhookService.self] ?? []).map(\.name) == ["orders", "audit"])
        let orders = try #require(configuration[WebhookService.self]?[0])
        #expect(orders.secrets.count == 2)
        #expect(orders.filter.tables == [TableName(schema: "public", name: "orders"), TableName(schema: "public", name: "Odd Table")])
        #expect(orders.filter.predicates.count == 2)
        #expect(orders.limits == .init())
        #expect(orders.concurrency == 16 && !orders.ordered)
        #expect(orders.headers == ["Authorization": "Bearer very-secret-token"])
        let audit = try #require(configuration[WebhookService.self]?[1])
        #expect(audit.ordered && audit.effectiveConcurrency == 1)
        #expect(audit.limits == .init(timeout: .seconds(2), maximumAttempts: 3, maximumAge: .seconds(3600)))
        #expect(audit.filter == .all)

        // check-config shows every endpoint setting, and neither a secret nor a header's value.
        let rendered = configuration.rendered
        #expect(rendered.contains("webhooks.orders.url: https://hooks.example.test/pgherald") || rendered.contains("webhooks.orders.url: 'https://hooks.example.test/pgherald'"))
        #expect(rendered.contains("webhooks.orders.secret_file: (2 from \(secretFile); redacted)"))
        for secret in [Self.secret, Self.oldSecret, String(Self.secret.dropFirst(6)), "very-secret-token"] {
            #expect(!rendered.contains(secret))
        }
    }

    @Test func badEndpointsAreRefusedWithTheKeyAndLine() async throws {
        var error = try await rejection("webhooks:\n  a:\n    url: ftp://x\n    secret: \(Self.secret)\n")
        #expect(error.key == "webhooks.a.url")
        #expect(error.source.hasSuffix("line 3"))

        error = try await rejection("webhooks:\n  a:\n    url: http://127.0.0.1/\n    where: amount.between.1\n    secret: \(Self.secret)\n")
        #expect(error.key == "webhooks.a.where")
        #expect(error.reason.hasPrefix("400 malformed_filter"))

        error = try await rejection("webhooks:\n  a:\n    url: http://127.0.0.1/\n")
        #expect(error.key == "webhooks.a.secret_file")
        #expect(error.reason.contains("whsec_"))

        error = try await rejection("webhooks:\n  a:\n    url: http://127.0.0.1/\n    secret: whsec_c2hvcnQ=\n")
        #expect(error.key == "webhooks.a.secret")
        #expect(!error.description.contains("c2hvcnQ"))

        error = try await rejection("webhooks:\n  a:\n    url: http://127.0.0.1/\n    secret: \(Self.secret)\n    retries: 3\n")
        #expect(error.key == "webhooks.a.retries")
        #expect(error.reason.contains("max_attempts"))

        error = try await rejection("webhooks:\n  \"a b\":\n    url: http://127.0.0.1/\n    secret: \(Self.secret)\n")
        #expect(error.reason.contains("name"))

        error = try await rejection("webhooks:\n  a:\n    url: http://127.0.0.1/\n    secret: \(Self.secret)\n    headers:\n      webhook-id: x\n")
        #expect(error.key == "webhooks.a.headers.webhook-id")

        error = try await rejection("webhooks:\n  a:\n    url: http://127.0.0.1/\n    secret_file: missing-credential\n")
        #expect(error.reason.contains("CREDENTIALS_DIRECTORY"))
    }

    @Test func aSecretFileCanBeASystemdCredential() async throws {
        _ = try file(Self.secret + "\n", named: "hook-secret")
        let configuration = try await load(
            "webhooks:\n  a:\n    url: http://127.0.0.1/\n    secret_file: hook-secret\n",
            environment: ["CREDENTIALS_DIRECTORY": directory.path]
        )
        #expect(configuration[WebhookService.self]?.first?.secrets.count == 1)
    }
}
