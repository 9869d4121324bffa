import Herald
@testable import HeraldPostgres
import Testing

@Suite struct DeliveryRecordTests {
    let first = TransactionSnapshot("100:100:")!
    let second = TransactionSnapshot("104:104:")!

    @Test func aTransactionResumesFromItsStepAfterWhatTheStepDeliveredBeforeIt() throws {
        let record = DeliveryRecord()
        record.record([100, 101], covered: first)
        record.record([101, 102], covered: first)
        record.record([103], covered: second)
        #expect(record.position(of: 100) == .init(older: first, deliveredBefore: []))
        #expect(record.position(of: 102) == .init(older: first, deliveredBefore: [100, 101]), "a transaction recorded twice keeps its first place")
        #expect(record.position(of: 103) == .init(older: second, deliveredBefore: []))
        #expect(record.position(of: 99) == nil)
    }

    @Test func theOldestStepsAreForgottenPastTheCapacity() {
        let record = DeliveryRecord(capacity: 3)
        record.record([1, 2], covered: first)
        record.record([3, 4], covered: second)
        #expect(record.position(of: 1) == nil && record.position(of: 2) == nil, "a whole step is forgotten")
        #expect(record.position(of: 4) == .init(older: second, deliveredBefore: [3]))
        record.record([5, 6, 7, 8], covered: TransactionSnapshot("108:108:")!)
        #expect(record.position(of: 3) == nil)
        #expect(record.position(of: 8)?.deliveredBefore == [5, 6, 7], "the newest step is kept whole")
    }
}
