import Herald
@testable import HeraldPostgres
import Testing

/// What a parked listener counts as lost on the way, transition by transition.
struct ParkedAnnouncementsTests {
    /// Transactions below 100 are visible, and 101 still runs.
    let confirmed = TransactionSnapshot("100:102:101")!

    @Test func anEventAConfirmedSweepFindsUnannouncedIsLostAtOnce() {
        var book = ParkedAnnouncements()
        let lost = book.found(transactionID: 90, confirmed: true)
        #expect(lost)
        #expect(book.unannounced.isEmpty, "counted now, not remembered")
    }

    @Test func anEventAnotherSweepFindsWaitsForItsNotificationOrTheNextTick() {
        var book = ParkedAnnouncements()
        let first = book.found(transactionID: 90, confirmed: false)
        let second = book.found(transactionID: 90, confirmed: false)
        #expect(!first && !second)
        #expect(book.unannounced == [90: 2])
        book.rang(90)
        #expect(book.unannounced.isEmpty, "its notification came: not lost")
        let lost = book.tickConfirmed(confirmed)
        #expect(lost == 0)
    }

    @Test func theNextTickCountsWhatNoNotificationBroughtAndForgetsIt() {
        var book = ParkedAnnouncements()
        _ = book.found(transactionID: 90, confirmed: false)
        _ = book.found(transactionID: 90, confirmed: false)
        _ = book.found(transactionID: 101, confirmed: false)
        let lost = book.tickConfirmed(confirmed)
        #expect(lost == 2, "101 is not in the tick's snapshot yet")
        #expect(book.unannounced == [101: 1])
        let later = book.tickConfirmed(TransactionSnapshot(xmin: 200, xmax: 200))
        #expect(later == 1)
        #expect(book.unannounced.isEmpty)
    }

    @Test func aTransactionLeftToASweepIsNotLostUntilASweepCoversIt() {
        var book = ParkedAnnouncements()
        book.leftToSweep(90)
        book.leftToSweep(101)
        let announced = book.found(transactionID: 90, confirmed: true)
        #expect(!announced, "it was announced")
        #expect(book.unannounced.isEmpty)
        book.swept(to: confirmed)
        #expect(book.announced == [101], "the sweep covered 90, not 101")
        let foundAgain = book.found(transactionID: 90, confirmed: true)
        #expect(foundAgain, "after its sweep, a new find of it counts")
    }

    @Test func unparkingForgetsEverything() {
        var book = ParkedAnnouncements()
        _ = book.found(transactionID: 90, confirmed: false)
        book.leftToSweep(101)
        book.unparked()
        #expect(book == ParkedAnnouncements())
    }
}
