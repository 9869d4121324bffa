@testable import HeraldBench
import Foundation
import Testing

@Suite struct WritersReportTests {
    /// One durable native run a round at 16 writers, no trigger, and one
    /// reference whose ratio to no trigger is taken round by round.
    private let resultsJSON = """
        {"date": "2026-11-27", "mode": "full", "machine": "test", "postgres": "15",
         "writersWithoutTrigger": [{"writers": 16, "tps": 2000, "rounds": [1000, 2000, 4000]}],
         "writersReferences": [{"label": "a minimal journal", "counts": [{"writers": 16, "tps": 1000, "rounds": [900, 1000, 3000]}]}],
         "runs": [\((1...3).map { round in """
            {"result": {"scenario": "writers", "label": "durable native, 16 writers, round \(round)", "subscribers": 1,
                        "expectedPerSubscriber": 10, "received": 10, "deliveredRatio": 1, "missing": 0, "duplicatedOrReordered": 0,
                        "overflows": 0, "resumes": 0, "failedStreams": 0, "latencyCDF": [], "clientCPUSeconds": 0,
                        "clientWallSeconds": 1, "clientThreads": 1},
             "committed": 10, "writerTPS": \(round * 500), "writers": 16}
            """ }.joined(separator: ", ")) ]}
        """

    @Test func referencesAreReportedWithTheMedianOfEachRoundsRatio() throws {
        let results = try JSONDecoder().decode(BenchResults.self, from: Data(resultsJSON.utf8))
        let report = MarkdownReport(results).text
        // Rounds 900/1000, 1000/2000 and 3000/4000: the median ratio is 0.75, where the medians' ratio would be 0.5.
        #expect(report.contains("| a minimal journal | 1,000 (0.75) |"))
        #expect(report.contains("| durable native | 1,000 (0.50) |"))
        #expect(report.contains("References, with no daemon"))
    }

    @Test func resultsFromBeforeTheReferencesHaveNoReferenceTable() throws {
        var json = try #require(try JSONSerialization.jsonObject(with: Data(resultsJSON.utf8)) as? [String: Any])
        json["writersReferences"] = nil
        let results = try JSONDecoder().decode(BenchResults.self, from: JSONSerialization.data(withJSONObject: json))
        let report = MarkdownReport(results).text
        #expect(report.contains("| durable native | 1,000 (0.50) |"))
        #expect(!report.contains("References, with no daemon"))
    }
}
