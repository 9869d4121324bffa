import AsyncHTTPClient
import Foundation
import Herald
import Testing

extension IntegrationTests.FairShareTests {
    /// One key, one user or one address could open `/events` and `/queries`
    /// streams over the network until `socket.max_subscribers` was reached,
    /// and every other client was then refused (HTTP/2 puts 100 streams on a
    /// connection, so the limit per address on connections did not hold
    /// them). Each now takes its share: a refusal names the limit, the
    /// holders are listed without their key or token, and a bystander's
    /// stream opens and delivers while the others are full.
    @Test func aKeyAUserOrAnAddressTakesItsShareOfStreams() async throws {
        typealias Network = IntegrationTests.NetworkTests
        let database = try TestDatabase.create()
        let served = try await Network.start(database, roleGrant: "tables: [course]", listener: ["proxies: []"], extra: """
            socket:
              max_subscribers_per_key: 3
              max_subscribers_per_user: 2
              max_subscribers_per_address: 7
            """)
        let client = TestCertificates.httpClient
        let alice = Network.token(sub: "alice"), bob = Network.token(sub: "bob")
        func open(_ path: String, _ token: String) async throws -> RawStream {
            try await RawStream(url: served.base + path, headers: [("Authorization", "Bearer \(token)")], client: client)
        }
        func refusal(_ path: String, _ token: String) async throws -> String {
            let (status, body) = try await Network.get(served, path, token: token, client: client)
            #expect(status == 429, "\(path): \(status) \(body)")
            return body
        }

        var keyStreams = [try await open("/events?table=course", Network.key), try await open("/queries/courses", Network.key)]
        keyStreams.append(try await open("/events?table=course", Network.key))
        let keyRefusal = try await refusal("/events?table=course", Network.key)
        #expect(keyRefusal.contains(#""error":"too_many_streams""#) && keyRefusal.contains("key app holds 3 streams, its limit (socket.max_subscribers_per_key)"), "\(keyRefusal)")
        // A live query is a stream of the same share.
        #expect(try await refusal("/queries/courses", Network.key).contains("socket.max_subscribers_per_key"))

        var aliceStreams = [try await open("/events?table=course", alice), try await open("/events?table=course", alice)]
        let userRefusal = try await refusal("/events?table=course", alice)
        #expect(userRefusal.contains("role authenticated, sub alice holds 2 streams, its limit (socket.max_subscribers_per_user)"), "\(userRefusal)")

        // The bystander: another user, while the key and alice are full.
        let bystander = try await open("/events?table=course", bob)
        try database.execute("INSERT INTO course (short_code, name) VALUES ('SH1', 'a fair share')")
        _ = try await bystander.text { $0.contains("SH1") }
        _ = try await keyStreams[0].text { $0.contains("SH1") }

        // Seven from one address: a new user is refused by the address's share.
        let carol = Network.token(sub: "carol")
        let secondBystander = try await open("/events?table=course", carol)
        let addressRefusal = try await refusal("/events?table=course", Network.token(sub: "dave"))
        #expect(addressRefusal.contains("streams, its limit (socket.max_subscribers_per_address)") && addressRefusal.contains("address "), "\(addressRefusal)")

        // /stats and /metrics list the holders, never a key or a token.
        let statistics = try await served.daemon.get("/stats").body
        #expect(statistics.contains(#"{"conditions":0,"consumer":"key app","streams":3}"#), "\(statistics)")
        #expect(statistics.contains(#"{"conditions":0,"consumer":"role authenticated, sub alice","streams":2}"#), "\(statistics)")
        #expect(!statistics.contains(Network.key) && !statistics.contains(alice), "no key or token in /stats")
        let metrics = try await served.daemon.get("/metrics").body
        #expect(metrics.contains(#"pgherald_socket_consumer_streams{consumer="key app"} 3"#), "\(metrics)")
        #expect(metrics.contains(#"pgherald_socket_consumer_streams{consumer="address "#), "\(metrics)")

        // A stream that ends gives its place back.
        aliceStreams.removeLast()
        try await waitFor(seconds: 10) {
            try await served.daemon.get("/stats").body.contains(#"{"conditions":0,"consumer":"role authenticated, sub alice","streams":1}"#)
        } failure: { "alice's closed stream is still counted" }
        aliceStreams.append(try await open("/events?table=course", alice))

        // The Unix socket's peers are local, and often a proxy for many: only the daemon's limit holds there.
        var local: [RawStream] = []
        for _ in 0..<4 { local.append(try await RawStream(socketPath: served.daemon.socketPath, path: "/events?table=course")) }
        try database.execute("INSERT INTO course (short_code, name) VALUES ('SH2', 'still fair')")
        for stream in local + [bystander, secondBystander] + aliceStreams { _ = try await stream.text { $0.contains("SH2") } }
        _ = try await served.daemon.stop()
    }
}
