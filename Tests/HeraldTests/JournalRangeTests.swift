import Testing
@testable import HeraldPostgres

/// Putting one read's rows in delivery order, without a database.
@Suite struct JournalRangeTests {
    private func rows(_ pairs: [(UInt64, UInt64)]) -> [Journal.Row] {
        pairs.map { Journal.Row(transactionID: $0.0, id: $0.1, event: "") }
    }

    /// Transaction 10 wrote event 1, waited for 11's lock, and wrote event 5 after 11 committed.
    @Test func aTransactionIsPlacedByItsLastEvent() {
        let read = rows([(10, 1), (10, 5), (11, 3), (11, 4), (12, 2)])
        let ordered = JournalRange.inDeliveryOrder(read).map { [$0.transactionID, $0.id] }
        #expect(ordered == [[12, 2], [11, 3], [11, 4], [10, 1], [10, 5]])
    }

    @Test func rowsAlreadyInOrderStayAsTheyAre() {
        let read = rows([(10, 1), (10, 2), (11, 3), (12, 4), (12, 6), (13, 7)])
        #expect(JournalRange.inDeliveryOrder(read).map(\.id) == [1, 2, 3, 4, 6, 7])
        #expect(JournalRange.inDeliveryOrder([]).isEmpty)
    }
}
