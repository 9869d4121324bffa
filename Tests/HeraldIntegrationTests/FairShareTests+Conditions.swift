import Foundation
import Herald
import Testing

extension IntegrationTests.FairShareTests {
    /// A `like` pattern of 90 `_` costs 2 (one for each 64 characters), so a
    /// credential with a limit of 5 holds two of them and no third.
    static let twoWordPattern = "%" + String(repeating: "_", count: 90)

    /// Fault 7 across streams: each stream's conditions were limited (32), but
    /// one user or key could open as many streams as its share of streams,
    /// each with its 32 costly patterns, and every event of the table was
    /// checked against all of them. Now what a holder's streams' conditions
    /// cost together has a limit too (`socket.max_conditions_per_user`,
    /// `_per_key`, `_per_address`): past it a stream gets 429
    /// `too_many_conditions`, naming the limit, and a closed stream gives its
    /// cost back. Another user's stream keeps receiving.
    @Test func aUserOrAKeyTakesItsShareOfConditionsOnStreams() async throws {
        typealias Network = IntegrationTests.NetworkTests
        let database = try TestDatabase.create()
        let served = try await Network.start(database, roleGrant: "tables: [course]", listener: ["proxies: []"], extra: """
            socket:
              max_conditions_per_user: 5
              max_conditions_per_key: 4
            """)
        let client = TestCertificates.httpClient
        let alice = Network.token(sub: "alice"), bob = Network.token(sub: "bob")
        let costly = "/events?table=course&where=name.like.\(Self.twoWordPattern.replacingOccurrences(of: "%", with: "%25"))"
        func open(_ path: String, _ token: String) async throws -> RawStream {
            try await RawStream(url: served.base + path, headers: [("Authorization", "Bearer \(token)")], client: client)
        }
        func refusal(_ path: String, _ token: String) async throws -> String {
            let (status, body) = try await Network.get(served, path, token: token, client: client)
            #expect(status == 429, "\(path): \(status) \(body)")
            return body
        }

        var aliceStreams = [try await open(costly, alice), try await open(costly, alice)]
        let userRefusal = try await refusal(costly, alice)
        #expect(userRefusal.contains(#""error":"too_many_conditions""#), "\(userRefusal)")
        #expect(userRefusal.contains("role authenticated, sub alice's streams hold conditions of cost 4, and this one's 2 would pass its limit, 5 (socket.max_conditions_per_user"), "\(userRefusal)")
        // A stream of plain comparisons fits in what is left; streams without conditions cost nothing.
        aliceStreams.append(try await open("/events?table=course&where=name.neq.Y", alice))
        aliceStreams.append(try await open("/events?table=course", alice))
        #expect(try await refusal("/events?table=course&where=short_code.eq.X1", alice).contains("socket.max_conditions_per_user"))

        let keyStreams = [try await open(costly, Network.key), try await open(costly, Network.key)]
        #expect(try await refusal("/events?table=course&where=short_code.eq.X2", Network.key).contains("key app's streams hold conditions of cost 4, and this one's 1 would pass its limit, 4 (socket.max_conditions_per_key"))

        let metrics = try await served.daemon.get("/metrics").body
        #expect(metrics.contains(#"pgherald_socket_consumer_conditions{consumer="role authenticated, sub alice"} 5"#), "\(metrics)")
        let stats = try await served.daemon.get("/stats").body
        #expect(stats.contains(#"{"conditions":5,"consumer":"role authenticated, sub alice","streams":4}"#), "\(stats)")

        // Another user is not held back, and receives.
        let bystander = try await open(costly, bob)
        try database.execute("INSERT INTO course (short_code, name) VALUES ('CO1', '\(String(repeating: "n", count: 95))')")
        for stream in [bystander, aliceStreams[0], keyStreams[0]] { _ = try await stream.text { $0.contains("CO1") } }

        // A stream that ends gives its cost back.
        aliceStreams.removeFirst()
        try await waitFor(seconds: 10) {
            try await served.daemon.get("/stats").body.contains(#"{"conditions":3,"consumer":"role authenticated, sub alice","streams":3}"#)
        } failure: { "alice's closed stream is still counted" }
        aliceStreams.append(try await open(costly, alice))
        _ = keyStreams
        _ = try await served.daemon.stop()
    }

    /// The same on the Supabase endpoint: a socket's bindings were limited
    /// (512), but one user could hold 100 sockets of them. Now what a
    /// credential's channels' conditions cost together has a limit
    /// (`realtime.max_conditions_per_user`, `_per_key`); a join past it is
    /// refused as a join, before any `ok`, and a channel that is left gives its
    /// cost back. Another user's channel keeps receiving.
    @Test func aUserTakesItsShareOfConditionsOnChannels() async throws {
        typealias Realtime = IntegrationTests.RealtimeTests
        let database = try TestDatabase.create()
        let (daemon, port, _) = try await Realtime.start(database, extra: "  max_conditions_per_user: 5\n")
        func token(_ sub: String) -> String {
            makeToken(#"{"role":"anon","sub":"\#(sub)","exp":\#(Int(Date().timeIntervalSince1970) + 3600)}"#, secret: Realtime.jwtSecret)
        }
        let costly = #"{"event":"*","schema":"public","table":"course","filter":"name=like.\#(Self.twoWordPattern)"}"#
        let alice = try await RealtimeTestClient(port: port, apikey: token("alice"))
        // Two sockets of one user share one limit.
        let aliceAgain = try await RealtimeTestClient(port: port, apikey: token("alice"))
        try await Realtime.join(alice, topic: "realtime:a0", bindings: costly)
        try await Realtime.join(aliceAgain, topic: "realtime:a1", bindings: costly)
        try await aliceAgain.send(joinRef: "3", ref: "3", topic: "realtime:a2", event: "phx_join", payload: Realtime.joinPayload(costly))
        let refusal = try await aliceAgain.next(within: 10, "the third join's refusal") { $0.topic == "realtime:a2" && ($0.event == "phx_reply" || $0.event == "system") }
        #expect(refusal.event == "phx_reply" && refusal.payload["status"] == .string("error"), "\(refusal.event) \(refusal.payload.jsonText)")
        #expect(refusal.payload["response"]?["reason"]?.stringValue?.contains(
            "role anon, sub alice's channels hold filter conditions of cost 4, and this join's 2 would pass its limit, 5 (realtime.max_conditions_per_user"
        ) == true, "\(refusal.payload.jsonText)")

        let metrics = try await daemon.get("/metrics").body
        #expect(metrics.contains(#"pgherald_realtime_consumer_conditions{consumer="role anon, sub alice"} 4"#), "\(metrics)")
        let stats = try await daemon.get("/stats").body
        #expect(stats.contains(#""conditions":4,"connections":2,"consumer":"role anon, sub alice""#), "\(stats)")

        let bob = try await RealtimeTestClient(port: port, apikey: token("bob"))
        try await Realtime.join(bob, topic: "realtime:b", bindings: costly)
        try database.execute("INSERT INTO course (short_code, name) VALUES ('CO2', '\(String(repeating: "n", count: 95))')")
        _ = try await bob.next(within: 10, "bob's event") { $0.event == "postgres_changes" }
        _ = try await alice.next(within: 10, "alice's event") { $0.event == "postgres_changes" }

        // A channel that is left gives its cost back.
        try await alice.send(joinRef: "1", ref: "l", topic: "realtime:a0", event: "phx_leave", payload: "{}")
        try await waitFor(seconds: 10) {
            try await aliceAgain.send(joinRef: "4", ref: "4", topic: "realtime:a2", event: "phx_join", payload: Realtime.joinPayload(costly))
            let reply = try await aliceAgain.next(within: 10, "a join after the leave") { $0.topic == "realtime:a2" && $0.event == "phx_reply" && $0.ref == .string("4") }
            return reply.payload["status"] == .string("ok")
        } failure: { "alice's left channel's conditions are still counted" }

        // A leave and a join of the same topic sent at once: the join gets its reply, as every join does
        // (it got none when the leave cancelled the channel's task before it ran).
        for round in 0..<5 {
            try await aliceAgain.send(joinRef: "4", ref: "leave\(round)", topic: "realtime:a2", event: "phx_leave")
            try await aliceAgain.send(joinRef: "4", ref: "again\(round)", topic: "realtime:a2", event: "phx_join", payload: Realtime.joinPayload(costly))
        }
        _ = try await aliceAgain.next(within: 10, "the last rejoin's reply") { $0.event == "phx_reply" && $0.ref == .string("again4") }
        let replies = Set(aliceAgain.unreadMessages.compactMap { $0.event == "phx_reply" ? $0.ref.stringValue : nil })
        #expect((0..<4).allSatisfy { replies.contains("again\($0)") }, "rejoins without a reply: \((0..<4).filter { !replies.contains("again\($0)") })")

        // A pushed token of another user moves the channel's count to that user: carol takes alice's
        // channel over and is charged for it, and when the socket closes nothing stays counted against either.
        let carolToken = token("carol")
        try await aliceAgain.send(joinRef: "4", topic: "realtime:a2", event: "access_token", payload: #"{"access_token":"\#(carolToken)"}"#)
        try await waitFor(seconds: 10) {
            try await daemon.get("/stats").body.contains(#"{"channels":1,"conditions":2,"connections":0,"consumer":"role anon, sub carol"}"#)
        } failure: { "carol is not charged for the channel she took over" }
        await aliceAgain.close()
        await alice.close()
        try await waitFor(seconds: 10) {
            let statistics = try await daemon.get("/stats").body
            return !statistics.contains("sub alice") && !statistics.contains("sub carol")
        } failure: { "a closed channel is still counted against alice or carol" }
        // alice's whole share is hers again.
        let aliceLater = try await RealtimeTestClient(port: port, apikey: token("alice"))
        for index in 0..<2 { try await Realtime.join(aliceLater, topic: "realtime:later\(index)", bindings: costly, ref: "l\(index)") }
        for client in [aliceLater, bob] { await client.close() }
        _ = try await daemon.stop()
    }
}
