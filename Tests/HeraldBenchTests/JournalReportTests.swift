@testable import HeraldBench
import Foundation
import Testing

@Suite struct JournalReportTests {
    /// Scenario u.'s journal under writers at 1,000 events a second and a 100 s retention, sampled every 50 s.
    /// 400 B an event in the first two retentions, `laterBytesPerEvent` after them.
    private func report(samples: [(seconds: Int, rows: Int)], laterBytesPerEvent: Int = 400, autovacuums: Int = 0) throws -> String {
        let listed = samples.map { sample in
            let bytes = sample.rows * (sample.seconds <= 200 ? 400 : laterBytesPerEvent)
            return #"{"seconds": \#(sample.seconds), "bytes": \#(bytes), "rows": \#(sample.rows), "current": 1}"#
        }
        let json = """
            {"date": "2026-11-28", "mode": "full", "machine": "test", "postgres": "15", "runs": [],
             "journalVacuum": {"seconds": 600, "writers": 16, "retentionSeconds": 100, "writerTPS": 1000, "pruned": 0,
                               "autovacuums": \(autovacuums), "autoanalyzes": 0, "deadRows": 0, "samples": [\(listed.joined(separator: ", "))]}}
            """
        return MarkdownReport(try JSONDecoder().decode(BenchResults.self, from: Data(json.utf8))).text
    }

    /// Parts emptied whole: the journal grows to two retentions, drops by one, and grows again.
    private let sawtooth = [(50, 50_000), (100, 100_000), (150, 150_000), (200, 200_000), (250, 150_000), (300, 210_000), (350, 160_000), (400, 205_000)]

    @Test func aJournalThatKeepsTwoRetentionsAndALittleMoreHolds() throws {
        #expect(try report(samples: sawtooth).contains("in no more room each: yes"))
    }

    @Test func aJournalThatKeepsGrowingDoesNot() throws {
        let growing = sawtooth.prefix(4) + [(250, 250_000), (300, 300_000)]
        #expect(try report(samples: Array(growing)).contains("in no more room each: **no**"))
    }

    @Test func aJournalWhoseEventsTakeMoreRoomDoesNot() throws {
        #expect(try report(samples: sawtooth, laterBytesPerEvent: 440).contains("in no more room each: yes"))
        #expect(try report(samples: sawtooth, laterBytesPerEvent: 600).contains("in no more room each: **no**"))
    }

    @Test func aVacuumFailsIt() throws {
        #expect(try report(samples: sawtooth, autovacuums: 1).contains("in no more room each: **no**"))
    }
}
