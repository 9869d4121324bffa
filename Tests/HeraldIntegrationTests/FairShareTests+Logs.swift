import Foundation
import Herald
import Testing

extension IntegrationTests.FairShareTests {
    /// Fault 9, log forging: the logfmt format (the default under systemd)
    /// escaped `\n` but not `\r\n`, one grapheme to Swift, nor ESC, and a
    /// refused private join logs its topic at info level, so that a topic
    /// holding CR LF wrote a line of its own: `ts=… level=critical …`. A key
    /// granted no private topic floods such joins, 20 at a time for 3 s (at most 3,000),
    /// while a bystander follows `course` on a channel of its own: each is
    /// refused and logged on one line, escaped, and the bystander keeps its
    /// idle p99.
    @Test func refusedJoinsWithForgedLinesCannotForgeALogOrSlowABystander() async throws {
        let database = try TestDatabase.create()
        let (daemon, port, config) = try await IntegrationTests.RealtimeTests.start(database)
        // The same configuration, logged as logfmt rather than the tests' json.
        _ = try await daemon.stop()
        let logged = try await SocketDaemon(database: database, arguments: ["--config", config, "--log-format", "logfmt"])
        let log = logged.process.standardErrorText
        let forged = "\r\nts=2026-01-01T00:00:00.000Z level=critical msg=\"forged\" \u{1B}[2J"
        let attacker = try await RealtimeTestClient(port: port, apikey: IntegrationTests.RealtimeTests.coursesKey)
        let bystander = try await Bystander(realtimePort: port, apikey: IntegrationTests.RealtimeTests.coursesKey, database: database)
        let idle = try await bystander.measure("idle")
        let (sent, underAttack) = try await bystander.measure("refused private joins with CR LF and ESC") {
            let started = ContinuousClock.now
            let join = #"{"config":{"broadcast":{"ack":false,"self":false},"presence":{"key":"","enabled":false},"private":true,"postgres_changes":[]}}"#
            var sent = 0
            for _ in 0..<150 where ContinuousClock.now - started < .seconds(3) {
                let first = sent
                for _ in 0..<20 {
                    sent += 1
                    try await attacker.send(joinRef: "\(sent)", ref: "\(sent)", topic: "realtime:room\(sent)\(forged)", event: "phx_join", payload: join)
                }
                for ref in first + 1...sent {
                    let reply = try await attacker.next(within: 20, "the refusal of join \(ref)") { $0.event == "phx_reply" && $0.ref == .string("\(ref)") }
                    #expect(reply.payload["response"]?["reason"]?.stringValue?.hasPrefix("Unauthorized") == true, "\(reply.payload.jsonText.prefix(300))")
                }
            }
            return sent
        }
        try await bystander.expectFairShare(idle: idle, underAttack: underAttack)
        await attacker.close()
        await bystander.close()
        _ = try await logged.stop()
        let stderr = await log.value
        // Split where a log reader would: CR LF is one Character, not "\n".
        let lines = stderr.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        #expect(!lines.contains { $0.hasPrefix("ts=2026-01-01") }, "a forged line: \(lines.filter { $0.contains("2026-01-01") }.prefix(3))")
        #expect(!stderr.utf8.contains(0x1B) && !stderr.utf8.contains(UInt8(ascii: "\r")), "a raw ESC or CR reached the log")
        let refusals = lines.filter { $0.contains("refused a private realtime channel") }
        #expect(refusals.count == sent, "\(refusals.count) refusals logged for \(sent) joins")
        #expect(refusals.allSatisfy { $0.contains(#"\r\nts=2026-01-01"#) && $0.contains(#"\u{1b}[2J"#) }, "\(refusals.first ?? "")")
    }
}
