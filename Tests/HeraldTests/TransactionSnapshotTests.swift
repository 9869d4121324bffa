import Herald
import Testing

@Suite struct TransactionSnapshotTests {
    @Test func parsesPostgresTextAndDecidesVisibility() throws {
        let snapshot = try #require(TransactionSnapshot("100:105:101,103"))
        #expect(snapshot.isVisible(99))
        #expect(snapshot.isVisible(100))
        #expect(!snapshot.isVisible(101))
        #expect(snapshot.isVisible(102))
        #expect(!snapshot.isVisible(103))
        #expect(snapshot.isVisible(104))
        #expect(!snapshot.isVisible(105))
        #expect(!snapshot.isVisible(1000))
        #expect(snapshot.description == "100:105:101,103")
        #expect(TransactionSnapshot("7:7:") == TransactionSnapshot(xmin: 7, xmax: 7))
    }

    @Test(arguments: ["", "1:2", "a:b:", "5:4:", "1:5:7", "1:5:0", "1:5:x", "1:2:3:4"])
    func rejectsMalformedText(_ text: String) {
        #expect(TransactionSnapshot(text) == nil)
    }
}
