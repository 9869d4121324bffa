@testable import Herald
import Testing

/// How many events a consumer that checks columns takes at once, transition by transition.
struct ColumnCheckBatchTests {
    @Test func cheapChecksDoubleTheBatchUpToWhatTheBudgetAllows() {
        var batch = ColumnCheckBatch()
        #expect(batch.size == 1, "nothing is known of the cost at first")
        var sizes: [Int] = []
        for _ in 0..<12 {
            batch.checked(batch.size, took: .microseconds(batch.size))
            sizes.append(batch.size)
        }
        // 1 µs an event: the budget of 1 ms affords 1,000.
        #expect(sizes == [2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 1000, 1000])
    }

    @Test func aCostlyCheckFallsBackToOneEventAtOnce() {
        var batch = ColumnCheckBatch()
        for _ in 0..<9 { batch.checked(batch.size, took: .nanoseconds(100 * batch.size)) }
        #expect(batch.size == 512)
        batch.checked(512, took: .milliseconds(1_024))
        #expect(batch.size == 1, "2 ms an event: one at a time")
        batch.checked(1, took: .milliseconds(3))
        #expect(batch.size == 1)
    }

    @Test func nothingCheckedOrNoTimeMeasuredKeepsItWithinBounds() {
        var batch = ColumnCheckBatch()
        batch.checked(0, took: .seconds(5))
        #expect(batch.size == 1, "an empty batch says nothing of the cost")
        for _ in 0..<40 { batch.checked(batch.size, took: .zero) }
        #expect(batch.size == ColumnCheckBatch.largest)
    }
}
