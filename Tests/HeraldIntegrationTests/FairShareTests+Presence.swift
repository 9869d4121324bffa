import Foundation
import Herald
import Testing

extension IntegrationTests.FairShareTests {
    /// Fault 4, `presence_state` amplification: a presence key had no length
    /// limit, and every join with presence on built its topic's whole state,
    /// and sent it, before the channel limit was checked; with 10 trackers
    /// holding 500 KB keys, 40 joins never read cost about 250 MB and 1.4 to
    /// 1.8 s of CPU. Now a key is at most 256 bytes, and a join refused at its
    /// limit gets its refusal alone. Ten trackers hold 50 KB metas on one
    /// topic, 500 KB of state, and a user at its channel limit sends joins
    /// with presence on to it, one after another for 3 s, while a
    /// bystander follows `course` on a channel of its own.
    @Test func aJoinPastItsLimitGetsNoPresenceState() async throws {
        let database = try TestDatabase.create()
        let (daemon, port, _) = try await IntegrationTests.RealtimeTests.start(database, extra: "  max_channels_per_user: 2\n")
        let allKey = IntegrationTests.RealtimeTests.allKey
        let join = #"{"config":{"broadcast":{"self":false,"ack":false},"presence":{"key":"KEY","enabled":true},"private":false,"postgres_changes":[]}}"#

        // A key past 256 bytes is refused before anything is built.
        let long = try await RealtimeTestClient(port: port, apikey: allKey)
        try await long.send(joinRef: "1", ref: "1", topic: "realtime:crowd", event: "phx_join", payload: join.replacingOccurrences(of: "KEY", with: String(repeating: "k", count: 300)))
        let refusal = try await long.next(within: 10, "the long key's refusal") { $0.event == "phx_reply" && $0.ref == .string("1") }
        #expect(refusal.payload["status"] == .string("error")
                && refusal.payload["response"]?["reason"]?.stringValue?.contains("config.presence.key is at most 256 bytes") == true, "\(refusal.payload.jsonText.prefix(300))")
        await long.close()

        var trackers: [RealtimeTestClient] = []
        let meta = #"{"type":"presence","event":"track","payload":{"blob":"\#(String(repeating: "m", count: 50_000))"}}"#
        for index in 0..<10 {
            let tracker = try await RealtimeTestClient(port: port, apikey: allKey)
            try await tracker.send(joinRef: "1", ref: "1", topic: "realtime:crowd", event: "phx_join", payload: join.replacingOccurrences(of: "KEY", with: "t\(index)"))
            _ = try await tracker.next(within: 10, "tracker \(index)'s join") { $0.event == "phx_reply" && $0.ref == .string("1") }
            try await tracker.send(joinRef: "1", ref: "t", topic: "realtime:crowd", event: "presence", payload: meta)
            let tracked = try await tracker.next(within: 10, "tracker \(index)'s track") { $0.event == "phx_reply" && $0.ref == .string("t") }
            #expect(tracked.payload["status"] == .string("ok"), "\(tracked.payload.jsonText.prefix(300))")
            trackers.append(tracker)
        }

        let mallory = try await RealtimeTestClient(port: port, apikey: makeToken(
            #"{"role":"anon","sub":"mallory","exp":\#(Int(Date().timeIntervalSince1970) + 3600)}"#, secret: IntegrationTests.RealtimeTests.jwtSecret
        ))
        // Its channels follow a row that never comes, so that its inbox holds only what the attack gets.
        let binding = #"{"event":"*","schema":"public","table":"course","filter":"short_code=eq.none"}"#
        for index in 0..<2 { try await IntegrationTests.RealtimeTests.join(mallory, topic: "realtime:m\(index)", bindings: binding, ref: "m\(index)") }
        let bystander = try await Bystander(realtimePort: port, apikey: IntegrationTests.RealtimeTests.coursesKey, database: database)
        let idle = try await bystander.measure("idle")
        let (sent, underAttack) = try await bystander.measure("joins past the limit with presence on") {
            let started = ContinuousClock.now
            var sent = 0
            // One at a time: a second join of a topic replaces the first, and a refused one must be over first.
            for _ in 0..<300 where ContinuousClock.now - started < .seconds(3) {
                sent += 1
                try await mallory.send(joinRef: "x\(sent)", ref: "x\(sent)", topic: "realtime:crowd", event: "phx_join", payload: join.replacingOccurrences(of: "KEY", with: "mallory"))
                let refused = try await mallory.next(within: 20, "the refusal of join \(sent)") { $0.event == "phx_reply" && $0.ref == .string("x\(sent)") }
                #expect(refused.payload["status"] == .string("error")
                        && refused.payload["response"]?["reason"]?.stringValue?.contains("(realtime.max_channels_per_user)") == true, "\(refused.payload.jsonText.prefix(300))")
            }
            return sent
        }
        try await bystander.expectFairShare(idle: idle, underAttack: underAttack)
        let states = mallory.unreadMessages.filter { $0.event == "presence_state" && $0.topic == "realtime:crowd" }
        #expect(states.count == 0, "\(states.count) of \(sent) refused joins got the topic's whole presence state")
        await bystander.close()
        for client in trackers + [mallory] { await client.close() }
        _ = try await daemon.stop()
    }

    /// The rest of fault 4: a join within the limits got its topic's whole
    /// presence state written straight to its socket, counted in nothing, so
    /// a client that joined many topics with large states and never read held
    /// one state a join (a state of 8.5 MB passed the socket's 8 MiB budget
    /// alone). Now the state goes as the channel's other frames go, within
    /// `realtime.max_queued_bytes`, and what does not fit is missed and
    /// counted. Ten topics hold 480 KB of presence each; 30 sockets that never
    /// read join all ten (144 MB of states), with a budget of 2 MiB a socket.
    @Test func presenceStatesWaitWithinTheSocketsBudget() async throws {
        let database = try TestDatabase.create()
        let (daemon, port, _) = try await IntegrationTests.RealtimeTests.start(database, extra: "  max_queued_bytes: 2097152\n")
        let allKey = IntegrationTests.RealtimeTests.allKey
        let topics = (0..<10).map { "realtime:crowd-\($0)" }
        @Sendable func join(key: String) -> String {
            #"{"config":{"broadcast":{"self":false,"ack":false},"presence":{"key":"\#(key)","enabled":true},"private":false,"postgres_changes":[]}}"#
        }
        let meta = #"{"type":"presence","event":"track","payload":{"blob":"\#(String(repeating: "m", count: 60_000))"}}"#
        var trackers: [RealtimeTestClient] = []
        for index in 0..<8 {
            let tracker = try await RealtimeTestClient(port: port, apikey: allKey)
            for (number, topic) in topics.enumerated() {
                try await tracker.send(joinRef: "j\(number)", ref: "j\(number)", topic: topic, event: "phx_join", payload: join(key: "t\(index)"))
                _ = try await tracker.next(within: 10, "tracker \(index)'s join of \(topic)") { $0.event == "phx_reply" && $0.ref == .string("j\(number)") }
                try await tracker.send(joinRef: "j\(number)", ref: "t\(number)", topic: topic, event: "presence", payload: meta)
                let tracked = try await tracker.next(within: 10, "tracker \(index)'s track on \(topic)") { $0.event == "phx_reply" && $0.ref == .string("t\(number)") }
                #expect(tracked.payload["status"] == .string("ok"), "\(tracked.payload.jsonText.prefix(300))")
            }
            trackers.append(tracker)
        }
        func missedFrames() async throws -> Int {
            let metrics = try await daemon.get("/metrics").body
            let line = metrics.split(separator: "\n").first { $0.hasPrefix("pgherald_realtime_missed_frames_total ") }
            return line.flatMap { Double($0.split(separator: " ").last ?? "").map(Int.init) } ?? 0
        }
        let missedBefore = try await missedFrames()
        let bystander = try await Bystander(realtimePort: port, apikey: IntegrationTests.RealtimeTests.coursesKey, database: database)
        let idle = try await bystander.measure("idle")
        let before = daemon.residentBytes
        let (silent, underAttack) = try await bystander.measure("30 sockets that never read joining 10 topics of 480 KB of presence") {
            var silent: [SilentPeer] = []
            for _ in 0..<30 {
                let joins = topics.enumerated().map { number, topic in Self.textFrame(#"["j\#(number)","j\#(number)","\#(topic)","phx_join",\#(join(key: ""))]"#) }
                silent.append(try SilentPeer(connectingTo: port, sending: Self.webSocketUpgrade(port: port, apikey: allKey) + joins.flatMap { $0 }))
            }
            try await waitFor(seconds: 30) { try await daemon.statistics().subscribers["realtime"] ?? 0 >= 30 * 10 + 1 } failure: { "the silent sockets did not join" }
            try await Task.sleep(for: .seconds(1))
            return silent
        }
        // 300 joins arrive at once, each framing for its socket a state of 480 KB: in the debug build, on
        // a machine that runs the other half of the suite beside it, the first events after them waited
        // up to 447 ms (locally 28). The floor is that of the other tests of frames this large.
        try await bystander.expectFairShare(idle: idle, underAttack: underAttack, floor: .seconds(1))
        let grown = daemon.residentBytes - before
        let missed = try await missedFrames() - missedBefore
        print("30 sockets that never read, 10 presence states of 480 KB each: the daemon grew by \(grown >> 20) MiB; \(missed) frames missed")
        // Each socket takes what fits its 2 MiB and misses the rest: 60 MiB at most, where 144 MB of states were held.
        #expect(missed > 0, "no presence state was missed: they are not counted in the sockets' budgets")
        #expect(grown < 100 << 20, "the daemon grew by \(grown >> 20) MiB for sockets that never read")
        _ = silent
        await bystander.close()
        for client in trackers { await client.close() }
        _ = try await daemon.stop()
    }
}
