import Foundation
import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// The leak property over `/events`, by every way a stream gets its
    /// events: live, with and without a filter, resumed from the cohort's
    /// memory and from the journal, for sessions that policies tell apart
    /// (``SessionPolicyScenario``).
    @Suite
    struct RowSecurityPathTests {
        @Test(arguments: SessionPolicyScenario.cells)
        func everyPathGetsExactlyWhatEachSessionCouldSee(_ cell: TriggerCell) async throws {
            let database = try TestDatabase.create(install: false, on: cell.cluster)
            try Installer.install(on: database.connect(), durability: .durable, triggers: cell.triggers)
            let role = RowSecurityTests.makeRole()
            defer { _ = try? database.execute("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
            let seed = UInt64.random(in: 0...UInt64(UInt32.max))
            var scenario = try SessionPolicyScenario(on: database, role: role, seed: seed)
            let writer = try database.connect()
            try writer.execute("CREATE TABLE marker (id int PRIMARY KEY)")
            let target = try await AttackTests.start(database, role: role)
            struct Live {
                var user: String
                var session: String
                var all: PeerStream
                var filtered: PeerStream
            }
            var live: [Live] = []
            for user in SessionPolicyScenario.users {
                for session in SessionPolicyScenario.sessions(of: user).prefix(2) {
                    let token = target.token(sub: user, session: session)
                    live.append(Live(
                        user: user, session: session,
                        all: try target.stream("/events?table=note,task&format=ndjson", token: token),
                        filtered: try target.stream("/events?table=note&where=body.like.n%25&format=ndjson", token: token)
                    ))
                }
            }
            try await target.daemon.waitForSubscribers(live.count * 2, kind: "ndjson")

            let reader = try database.connect()
            let everySession = SessionPolicyScenario.users.flatMap { user in SessionPolicyScenario.sessions(of: user).map { (user: user, session: $0) } }
            func views() throws -> [String: [String: String]] {
                try Dictionary(uniqueKeysWithValues: everySession.map {
                    ($0.session, try scenario.visibleRows(as: $0.user, session: $0.session, on: reader))
                })
            }
            var expected: [String: [String]] = [:]
            // The late sessions resume from the journal after a marker half-way. A replay judges each change
            // against the other tables as they are when it is read (docs/supabase.md): membership changes only before it.
            let halfWay = 25
            var first = ""
            for step in 0..<50 {
                if step == halfWay {
                    try writer.execute("INSERT INTO marker VALUES (1)")
                    first = try #require(try writer.execute("SELECT max(id)::text FROM pgherald.journal").rows.first?[0] ?? nil)
                }
                let before = try views()
                let next = try scenario.step(step, membership: step < halfWay, on: writer)
                guard !next.statements.isEmpty else { continue }
                // Policies read team_member when the daemon checks: a change to it waits for the checks of what came before.
                if next.changesMembership { try await Task.sleep(for: .milliseconds(400)) }
                try writer.execute(next.script)
                let after = try views()
                for (_, session) in everySession where step >= halfWay || !session.hasSuffix("-late") {
                    expected[session, default: []] += SessionPolicyScenario.expected(next.touches, before: before[session]!, after: after[session]!)
                }
            }

            var mismatches: [String] = []
            /// - Parameter after: events up to this id are left out: a resume from the journal starts at the
            ///   daemon's checkpoint before the event resumed after, and may repeat what came before it.
            func check(_ stream: PeerStream, _ name: String, wanted: [String], after: UInt64 = 0) async throws {
                _ = try? await stream.wait(within: 15) { text in
                    text.split(separator: "\n").filter { (try? Event(payload: String($0))).map { (UInt64($0.id) ?? 0) > after } ?? false }.count >= wanted.count
                }
                try await Task.sleep(for: .milliseconds(300))
                let lines = stream.text.split(separator: "\n")
                let received = try lines.filter { $0.contains("\"op\":") }.map { try Event(payload: String($0)) }
                    .filter { (UInt64($0.id) ?? 0) > after }
                // Heartbeats aside, any other frame (a reset, an ending) is a path that lost its place.
                let frames = lines.filter { !$0.contains("\"op\":") && !$0.contains("heartbeat") }
                if !frames.isEmpty { mismatches.append("\(name): frames other than events: \(frames)") }
                // A partition's rows publish under the partitioned table, with their leaf beside it.
                let misnamed = received.filter { $0.table.name.hasPrefix("task") && ($0.table.name != "task" || $0.partition?.name.hasPrefix("task_") != true) }
                if !misnamed.isEmpty { mismatches.append("\(name): tasks not under their partitioned table: \(misnamed.map { ($0.table, $0.partition) })") }
                let got = received.map(SessionPolicyScenario.summary)
                if got != wanted { mismatches.append("\(name): expected \(wanted), got \(got)") }
                if stream.text.contains("secret") { mismatches.append("\(name): a secret column") }
            }
            for stream in live {
                let wanted = expected[stream.session, default: []]
                try await check(stream.all, "\(stream.session) live", wanted: wanted)
                try await check(stream.filtered, "\(stream.session) live, where=body.like.n%", wanted: wanted.filter(SessionPolicyScenario.passesFilter))
            }
            // Resumed from the cohort's memory: a phone that reconnects after its first event.
            for user in SessionPolicyScenario.users {
                let session = "\(user)-phone"
                let wanted = expected[session, default: []]
                let firstSeen = try live.first { $0.session == session }?.all.text.split(separator: "\n")
                    .first { $0.contains("\"op\":") }.map { try Event(payload: String($0)).id }
                guard let firstSeen, !wanted.isEmpty else { continue }
                let resumed = try target.stream("/events?table=note,task&format=ndjson&since=\(firstSeen)", token: target.token(sub: user, session: session))
                try await check(resumed, "\(session) resumed from memory after \(firstSeen)", wanted: Array(wanted.dropFirst()))
                // A session the daemon never saw: its cohort is new, so it reads the journal, filter and all.
                let late = "\(user)-late"
                let token = target.token(sub: user, session: late)
                let fromJournal = try target.stream("/events?table=note,task&format=ndjson&since=\(first)", token: token)
                let filteredFromJournal = try target.stream("/events?table=note&where=body.like.n%25&format=ndjson&since=\(first)", token: token)
                let lateWanted = expected[late, default: []]
                let marker = try #require(UInt64(first))
                try await check(fromJournal, "\(late) from the journal", wanted: lateWanted, after: marker)
                try await check(filteredFromJournal, "\(late) from the journal, where=body.like.n%", wanted: lateWanted.filter(SessionPolicyScenario.passesFilter), after: marker)
            }
            cell.report("RowSecurityPathTests", passed: mismatches.isEmpty ? 1 : 0, total: 1)
            #expect(mismatches.isEmpty, "seed \(seed): \(mismatches.joined(separator: "\n"))")
            // A hidden column is refused on every path, before anything is read.
            let token = target.token(sub: "ann", session: "ann-phone")
            for path in ["/events?table=note&where=secret.eq.x", "/events?table=note&where=secret.eq.x&since=\(first)"] {
                let refused = try await target.request(path, token: token)
                #expect(refused.status == 403 && refused.body.contains("permission denied"), "\(path): \(refused)")
            }
            _ = try await target.daemon.stop()
        }
    }
}
