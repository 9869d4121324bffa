import Foundation
import Testing

extension IntegrationTests.NetworkTests {
    /// Short bounds, so that the tests run in seconds.
    static let deadlines = ["handshake_timeout: 1s", "request_timeout: 1s", "idle_timeout: 2s"]

    /// Connects that never send a ClientHello, and one that sends it a byte
    /// at a time, are closed at `http.handshake_timeout`; before, they stayed
    /// for minutes and 10,000 of them filled `http.max_connections`. Three
    /// waves of them, the first with the trickle, while a bystander follows
    /// its stream on the same listener: its events come as fast as when idle,
    /// and its requests are answered.
    @Test func aHandshakeThatDoesNotFinishIsCutAtItsBound() async throws {
        let database = try TestDatabase.create()
        let served = try await Self.start(database, listener: Self.deadlines + ["max_connections: 12"])
        let bystander = try await Bystander(
            base: served.base, headers: [("Authorization", "Bearer \(Self.key)")], client: TestCertificates.httpClient, database: database
        )
        let idle = try await bystander.measure("idle")
        let (_, underAttack) = try await bystander.measure("three waves of unfinished handshakes") {
            for wave in 0..<3 {
                let silent = try (0..<8).map { _ in try RawConnection(port: served.port) }
                #expect(try await Self.get(served, "/healthz", client: TestCertificates.httpClient).status == 200, "a bystander is answered meanwhile")
                if wave == 0 { try await Self.trickleAClientHello(port: served.port) }
                for connection in silent {
                    let closed = try #require(try await connection.closed(within: 3), "a silent connect stayed open \(ContinuousClock.now - connection.opened)")
                    #expect(closed > .milliseconds(900) && closed < .seconds(3), "closed after \(closed); http.handshake_timeout is 1 s")
                }
            }
        }
        try await bystander.expectFairShare(idle: idle, underAttack: underAttack)
        #expect(try await Self.get(served, "/healthz", client: TestCertificates.httpClient).status == 200)
        _ = try await served.daemon.stop()
    }

    /// A TLS record header announcing a 512-byte ClientHello, then its bytes one every 100 ms:
    /// never idle for long, and cut at `http.handshake_timeout` (1 s here).
    static func trickleAClientHello(port: Int) async throws {
        let trickling = try RawConnection(port: port)
        let hello: [UInt8] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC, 0x03, 0x03] + (0..<49).map { UInt8($0) }
        var cutAfter: Duration?
        for byte in hello {
            guard trickling.send([byte]) else { break }
            if let closed = try await trickling.closed(within: 0.1) {
                cutAfter = closed
                break
            }
        }
        let cut = try #require(cutAfter, "a ClientHello trickled for \(hello.count / 10) s was not cut")
        #expect(cut > .milliseconds(900) && cut < .seconds(3), "cut after \(cut); http.handshake_timeout is 1 s")
    }

    /// An HTTP/2 connection that opens no stream is closed at
    /// `http.idle_timeout`, its PING or SETTINGS notwithstanding, while a
    /// stream open longer than that keeps its connection. Four such
    /// connections at once, while a bystander follows its stream on the same
    /// listener: its events come as fast as when idle, and its requests are answered.
    @Test func anHTTP2ConnectionWithoutStreamsIsClosedWhenIdle() async throws {
        let database = try TestDatabase.create()
        let served = try await Self.start(database, listener: Self.deadlines)
        let stream = try Self.curl(
            ["--http2", "-H", "Authorization: Bearer \(Self.key)", served.base + "/events?table=course"], served: served, seconds: 12
        )
        try await served.daemon.waitForSubscribers(1, kind: "sse")
        let bystander = try await Bystander(
            base: served.base, headers: [("Authorization", "Bearer \(Self.key)")], client: TestCertificates.httpClient, database: database
        )
        let idle = try await bystander.measure("idle")
        let (_, underAttack) = try await bystander.measure("four HTTP/2 connections without streams") {
            let probes = try (0..<4).map { _ in try TLSProbe(port: served.port, offering: "h2", trusting: served.certificates.caPath) }
            // The client preface and an empty SETTINGS frame, then nothing: a connection without a stream.
            for idle in probes { #expect(idle.send(Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + [0, 0, 0, 4, 0, 0, 0, 0, 0])) }
            #expect(try await Self.get(served, "/healthz", client: TestCertificates.httpClient).status == 200, "a bystander is answered meanwhile")
            for idle in probes {
                let closed = try #require(try await idle.ended(within: 8), "an HTTP/2 connection without streams stayed open")
                #expect(idle.printed.contains("ALPN protocol: h2"), "\(idle.printed.prefix(2000))")
                #expect(closed > .milliseconds(1800) && closed < .seconds(5), "closed after \(closed); http.idle_timeout is 2 s")
            }
        }
        try await bystander.expectFairShare(idle: idle, underAttack: underAttack)
        #expect(try await Self.get(served, "/healthz", client: TestCertificates.httpClient).status == 200)

        // The stream, open for longer than http.idle_timeout, still delivers.
        try database.execute("INSERT INTO course (short_code, name) VALUES ('IDLE1', 'Idle')")
        let output = try await stream.finish(within: 20).stdout
        #expect(output.contains("\"short_code\":\"IDLE1\"") && output.hasSuffix("version=2\n"), "\(output.suffix(300))")
        _ = try await served.daemon.stop()
    }

    /// An HTTP/1.1 request head sent a byte at a time over TLS is cut at `http.request_timeout`.
    @Test func aTrickledRequestHeadIsCutAtItsBound() async throws {
        let database = try TestDatabase.create()
        let served = try await Self.start(database, listener: Self.deadlines)
        let client = try TLSProbe(port: served.port, offering: "http/1.1", trusting: served.certificates.caPath)
        // 89 bytes, one every 100 ms: never idle for long, and whole after 9 s.
        for byte in Array("GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ".utf8) + Array(repeating: UInt8(ascii: "a"), count: 40) {
            guard client.send([byte]), try await client.ended(within: 0.1) == nil else { break }
        }
        let closed = try #require(try await client.ended(within: 3), "a request head trickled for 9 s was not cut")
        #expect(!client.printed.contains("HTTP/1.1 200"), "\(client.printed.suffix(500))")
        #expect(closed < .seconds(4), "closed after \(closed); http.request_timeout is 1 s")
        #expect(try await Self.get(served, "/healthz", client: TestCertificates.httpClient).status == 200)
        _ = try await served.daemon.stop()
    }
}
