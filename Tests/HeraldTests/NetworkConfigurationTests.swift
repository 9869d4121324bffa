import Foundation
import HTTPTypes
@testable import HeraldAPI
import HeraldConfiguration
@testable import HeraldHTTP
import Hummingbird
import Testing

extension ConfigurationTests {
    /// `http.listen`, `tls.*` and `http.cors.origins`: what is refused, what is warned of.
    @Test func theNetworkListenerIsOffUntilNamedAndPlainHTTPStaysOnLoopback() async throws {
        #expect(try await load("").outputs["socket"]?.as(SocketConfiguration.self)?.network == nil)
        let loopback = try await load("http:\n  listen: [127.0.0.1:8443, \"[::1]:8443\"]\n")
        let network = try #require(loopback[SocketServer.self]?.network)
        #expect(network.listen.map(\.description) == ["127.0.0.1:8443", "[::1]:8443"])
        #expect(network.tls == nil && network.scheme == "http" && network.corsOrigins.isEmpty && network.maximumConnections == 10_000)
        #expect(loopback.warnings.allSatisfy { !$0.contains("unencrypted") })

        let exposed = try await rejection("http:\n  listen: 0.0.0.0:8443\n")
        #expect(exposed.key == "http.listen" && exposed.reason.contains("not loopback, and there is no TLS"), "\(exposed.reason)")
        let plaintext = try await load("http:\n  listen: 0.0.0.0:8443\n  plaintext: true\n")
        #expect(plaintext.warnings.contains { $0.contains("unencrypted") })

        let halfTLS = try await rejection("http:\n  listen: 127.0.0.1:8443\ntls:\n  cert_file: /etc/ssl/none.pem\n")
        #expect(halfTLS.key == "tls.cert_file" && halfTLS.reason.contains("without tls.key_file"))
        let unreadable = try await rejection("http:\n  listen: 127.0.0.1:8443\ntls:\n  cert_file: /nonexistent/cert.pem\n  key_file: /nonexistent/key.pem\n")
        #expect(unreadable.key == "tls.cert_file" && unreadable.reason.contains("/nonexistent/cert.pem"), "\(unreadable.reason)")
        let credential = try await rejection("http:\n  listen: 127.0.0.1:8443\ntls:\n  cert_file: herald.crt\n  key_file: herald.key\n")
        #expect(credential.reason.contains("CREDENTIALS_DIRECTORY is not set"), "a bare name is a systemd credential: \(credential.reason)")
        let orphanTLS = try await rejection("tls:\n  cert_file: a.pem\n  key_file: b.pem\n")
        #expect(orphanTLS.reason.contains("http.listen"), "\(orphanTLS.reason)")
        let orphanCORS = try await rejection("http:\n  cors:\n    origins: [https://app.example.com]\n")
        #expect(orphanCORS.key == "http.cors.origins")
        let path = try await rejection("http:\n  listen: 127.0.0.1:8443\n  cors:\n    origins: [https://app.example.com/]\n")
        #expect(path.key == "http.cors.origins" && path.reason.contains("is not an origin"))
        let off = try await rejection("socket:\n  enabled: false\nhttp:\n  listen: 127.0.0.1:8443\n")
        #expect(off.key == "http.listen" && off.reason.contains("socket.enabled is false"))
    }

    /// `http.handshake_timeout`, `http.request_timeout` and `http.idle_timeout`: their defaults, units, and what is refused.
    @Test func theListenerDeadlinesHaveDefaultsAndTakeDurations() async throws {
        let defaults = try #require(try await load("http:\n  listen: 127.0.0.1:8443\n")[SocketServer.self]?.network)
        #expect(defaults.timeouts == .init(handshake: .seconds(10), request: .seconds(10), idle: .seconds(60)))
        let set = try await load("http:\n  listen: 127.0.0.1:8443\n  handshake_timeout: 1500ms\n  request_timeout: 5s\n  idle_timeout: 2m\n")
        #expect(set[SocketServer.self]?.network?.timeouts == .init(handshake: .milliseconds(1500), request: .seconds(5), idle: .seconds(120)))
        let zero = try await rejection("http:\n  listen: 127.0.0.1:8443\n  handshake_timeout: 0s\n")
        #expect(zero.key == "http.handshake_timeout" && zero.reason.contains("a duration such as 10s"), "\(zero.reason)")
        let orphan = try await rejection("http:\n  idle_timeout: 30s\n")
        #expect(orphan.key == "http.idle_timeout" && orphan.reason.contains("http.listen is not set"), "\(orphan.reason)")
    }

    /// A certificate and key that belong together are read; a key of another certificate is refused naming both files.
    @Test func theCertificateAndKeyMustBelongTogether() async throws {
        func openssl(_ arguments: [String]) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.arguments = arguments
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            try #require(process.terminationStatus == 0, "openssl \(arguments.prefix(2))")
        }
        for name in ["one", "two"] {
            let base = directory.appending(path: name).path
            try openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
                         "-subj", "/CN=localhost", "-keyout", base + ".key", "-out", base + ".pem"])
        }
        let one = directory.appending(path: "one").path
        let two = directory.appending(path: "two").path
        let good = try await load("http:\n  listen: 127.0.0.1:8443\n  cors:\n    origins: [https://app.example.com]\ntls:\n  cert_file: \(one).pem\n  key_file: \(one).key\n")
        #expect(good[SocketServer.self]?.network?.tls?.certificatePath == one + ".pem")
        #expect(good[SocketServer.self]?.network?.scheme == "https")
        let mixed = try await rejection("http:\n  listen: 127.0.0.1:8443\ntls:\n  cert_file: \(one).pem\n  key_file: \(two).key\n")
        #expect(mixed.key == "tls.cert_file" && mixed.reason.contains("is not the key of the certificate"), "\(mixed.reason)")
        #expect(!mixed.reason.contains("failedToLoadPrivateKey") && mixed.reason.contains("give tls.key_file the key"), "\(mixed.reason)")
        let credentials = try await load(
            "http:\n  listen: 127.0.0.1:8443\ntls:\n  cert_file: one.pem\n  key_file: one.key\n", environment: ["CREDENTIALS_DIRECTORY": directory.path]
        )
        #expect(credentials[SocketServer.self]?.network?.tls?.keyPath == one + ".key", "bare names are read from CREDENTIALS_DIRECTORY")
    }
}

@Suite struct NetworkListenerTests {
    /// Exact origins only: the listed one is echoed with `Vary`, others get nothing, and a preflight is answered or refused.
    @Test func corsAnswersListedOriginsOnly() async throws {
        let policy = CORSPolicy(origins: ["https://app.example.com"])
        #expect(policy.headers(forOrigin: "https://app.example.com")[.accessControlAllowOrigin] == "https://app.example.com")
        #expect(policy.headers(forOrigin: "https://app.example.com")[.vary] == "Origin")
        #expect(policy.headers(forOrigin: "https://evil.example.com").isEmpty)
        #expect(policy.headers(forOrigin: nil).isEmpty)

        func preflight(origin: String) -> Response? {
            let head = HTTPRequest(method: .options, scheme: "https", authority: "herald", path: "/events", headerFields: [
                .origin: origin, .accessControlRequestMethod: "GET", .accessControlRequestHeaders: "authorization",
            ])
            return policy.preflight(Request(head: head, body: .init(buffer: .init())))
        }
        let allowed = try #require(preflight(origin: "https://app.example.com"))
        #expect(allowed.status == .noContent)
        #expect(allowed.headers[.accessControlAllowHeaders]?.contains("authorization") == true)
        #expect(allowed.headers[.accessControlAllowHeaders]?.contains("last-event-id") == true)
        #expect(preflight(origin: "https://evil.example.com")?.status == .forbidden)
        let plain = HTTPRequest(method: .get, scheme: "https", authority: "herald", path: "/events", headerFields: [.origin: "https://app.example.com"])
        #expect(policy.preflight(Request(head: plain, body: .init(buffer: .init()))) == nil, "only OPTIONS with a requested method is a preflight")
    }

    /// The token comes as `Authorization: Bearer`, `?access_token=` or the console's `?key=`.
    @Test func theTokenIsReadFromTheHeaderOrTheQuery() {
        func head(_ path: String, authorization: String? = nil) -> HTTPRequest {
            var fields = HTTPFields()
            if let authorization { fields[.authorization] = authorization }
            return HTTPRequest(method: .get, scheme: "https", authority: "herald", path: path, headerFields: fields)
        }
        #expect(SocketServer.presentedToken(head("/events", authorization: "Bearer abc.def.ghi")) == "abc.def.ghi")
        #expect(SocketServer.presentedToken(head("/events?table=course&access_token=tok123")) == "tok123")
        #expect(SocketServer.presentedToken(head("/console/state?key=k1")) == "k1")
        #expect(SocketServer.presentedToken(head("/events?access_token=q", authorization: "Bearer h")) == "h", "the header wins")
        #expect(SocketServer.presentedToken(head("/events", authorization: "Basic dXNlcg==")) == nil)
        #expect(SocketServer.presentedToken(head("/events")) == nil)
    }

    /// A stream's last frame says why it ended: a revoked grant, or an expired token.
    @Test func streamEndingsNameTheirReason() {
        #expect(StreamEnding.tokenExpired("the token expired at X").frame(in: .sse).hasPrefix("event: token_expired\ndata: {\"error\":\"token_expired\""))
        #expect(StreamEnding.revoked("grant changed").frame(in: .sse).hasPrefix("event: revoked\n"))
        #expect(StreamEnding.tokenExpired("x").frame(in: .ndjson).hasPrefix("{\"error\":\"token_expired\""))
    }
}
