import Herald
@testable import HeraldPostgres
import Testing

@Suite struct ReplayLookupsTests {
    @Test func aBatchTakesWhatWaitsUpToItsLimitAndALostOneWaitsAgainFirst() {
        var lookups = ReplayLookups()
        let tickets = (1...(ReplayLookups.batchLimit + 3)).map { lookups.add(UInt64($0)) }
        let first = lookups.takeBatch()
        #expect(first.count == ReplayLookups.batchLimit)
        #expect(first.first?.ticket == tickets[0])
        lookups.putBack(first)
        #expect(lookups.takeBatch().map(\.ticket) == first.map(\.ticket), "the batch put back comes first")
        #expect(lookups.takeBatch().map(\.eventID) == (1...3).map { UInt64(ReplayLookups.batchLimit + $0) })
        #expect(lookups.takeBatch().isEmpty)
    }

    @Test func anAnswerIsTakenOnceAndACancelledTicketLeavesNothing() throws {
        var lookups = ReplayLookups()
        let answered = lookups.add(7), cancelled = lookups.add(8)
        #expect(lookups.take(answered) == nil, "not looked up yet")
        lookups.cancel(cancelled)
        #expect(lookups.takeBatch().map(\.eventID) == [7])
        lookups.answer(answered, with: .success(.reset(reason: "gone")))
        guard case .success(.reset(let reason))? = lookups.take(answered) else {
            Issue.record("no answer")
            return
        }
        #expect(reason == "gone")
        #expect(lookups.take(answered) == nil)
    }

    @Test func idsFarApartAreLookedUpInGroupsOfTheirOwn() {
        #expect(ReplayLookups.clusters(of: [50, 10, 10, 20_000, 20_500, 100_000], widestGap: 10_000) == [[10, 50], [20_000, 20_500], [100_000]])
        #expect(ReplayLookups.clusters(of: []).isEmpty)
    }
}

@Suite struct ReplayPagesTests {
    private func key(after id: UInt64) -> ReplayPages.Key {
        let older = TransactionSnapshot(xmin: 10, xmax: 10), newer = TransactionSnapshot(xmin: 20, xmax: 20)
        return ReplayPages.Key(older: older, newer: newer, afterTransactionID: id == 0 ? 0 : 15, afterEventID: id)
    }

    private func page(_ ids: ClosedRange<UInt64>) -> ReplayPages.Kept {
        // Not decoded: what is kept is counted by its rows, and a hundred thousand decodes would only slow the test.
        ReplayPages.Kept(page: Journal.Page(rows: ids.map { Journal.Row(transactionID: 15, id: $0, event: "{}") }, isLast: false), events: ids.map { _ in nil })
    }

    @Test func aPageIsSharedUntilItsLifetimeEnds() {
        var pages = ReplayPages()
        let start = ContinuousClock.now
        let range = JournalRange(older: key(after: 0).older, newer: key(after: 0).newer)
        pages.store(page(1...3), for: key(after: 0), range: range, now: start)
        #expect(pages.page(key(after: 0), now: start + .seconds(1))?.positions.map(\.id) == [1, 2, 3])
        #expect(pages.page(key(after: 3), now: start + .seconds(1)) == nil, "another position")
        #expect(pages.range(older: range.older, newer: range.newer) != nil)
        #expect(pages.page(key(after: 0), now: start + ReplayPages.lifetime) == nil)
        #expect(pages.range(older: range.older, newer: range.newer) == nil, "dropped with its last page")
    }

    @Test func pagesPastTheRowLimitAreNotKept() {
        var pages = ReplayPages()
        let now = ContinuousClock.now
        let range = JournalRange(older: key(after: 0).older, newer: key(after: 0).newer)
        let limit = UInt64(ReplayPages.rowLimit)
        pages.store(page(1...(limit - 10)), for: key(after: 0), range: range, now: now)
        pages.store(page((limit - 9)...(limit + 10)), for: key(after: limit - 10), range: range, now: now)
        #expect(pages.page(key(after: 0), now: now) != nil)
        #expect(pages.page(key(after: limit - 10), now: now) == nil, "20 more rows would pass the limit")
    }

    /// Pages of large rows are kept within a byte limit as well: 500 rows of
    /// 1 MB were kept whole, and four replays of them left 1.3 GB behind.
    /// What counts is the events as decoded; the rows' text is not kept.
    @Test func keptPagesAreBoundedInBytes() throws {
        var pages = ReplayPages()
        let now = ContinuousClock.now
        let range = JournalRange(older: key(after: 0).older, newer: key(after: 0).newer)
        let row = #"{"id":"1","op":"INSERT","schema":"public","table":"t","pk":{"id":1},"new":{"b":"\#(String(repeating: "q", count: 1_000_000))"},"old":null,"txid":"15","at":"2026-11-30T00:00:00.000000Z"}"#
        let event = try Event(payload: row)
        for index in UInt64(0)..<10 {
            let ids = (index * 20 + 1)...(index * 20 + 20)
            let kept = ReplayPages.Kept(
                page: Journal.Page(rows: ids.map { Journal.Row(transactionID: 15, id: $0, event: row[...]) }, isLast: false), events: ids.map { _ in event }
            )
            #expect(kept.bytes >= 20_000_000, "a page's events count: \(kept.bytes)")
            pages.store(kept, for: key(after: index * 20), range: range, now: now)
        }
        #expect(pages.keptBytes <= ReplayPages.byteLimit, "\(pages.keptBytes) bytes kept")
        #expect(pages.keptBytes >= 100_000_000, "pages within the limit are kept: \(pages.keptBytes)")
        #expect(pages.page(key(after: 0), now: now) != nil, "the first pages stay for other readers")
        #expect(pages.page(key(after: 180), now: now) == nil, "the last page would pass the limit")
    }

    /// Pages go when their lifetime ends even if no reader comes: the first
    /// store asks its owner for a sweep, which goes on while pages are kept.
    @Test func expiredPagesAreSweptWithoutAnotherStore() {
        var pages = ReplayPages()
        let start = ContinuousClock.now
        let range = JournalRange(older: key(after: 0).older, newer: key(after: 0).newer)
        let first = pages.store(page(1...3), for: key(after: 0), range: range, now: start)
        #expect(first, "the first store starts a sweep")
        let second = pages.store(page(4...6), for: key(after: 3), range: range, now: start + .seconds(5))
        #expect(!second, "one is under way")
        let firstSweep = pages.sweep(now: start + ReplayPages.lifetime)
        #expect(firstSweep, "the second page is not yet expired")
        #expect(pages.page(key(after: 0), now: start) == nil, "the first page was dropped by the sweep")
        let lastSweep = pages.sweep(now: start + .seconds(5) + ReplayPages.lifetime)
        #expect(!lastSweep, "nothing is left to sweep")
        #expect(pages.keptBytes == 0)
        #expect(pages.range(older: range.older, newer: range.newer) == nil)
        let afterwards = pages.store(page(7...9), for: key(after: 6), range: range, now: start + .seconds(20))
        #expect(afterwards, "a store after the sweep ended starts another")
    }

    /// A holder's replays share the page budget, down to a floor each; a
    /// kept page is taken up to a share, at least one row.
    @Test func aHoldersReplaysShareThePageBudget() throws {
        let row = #"{"id":"1","op":"INSERT","schema":"public","table":"t","pk":{"id":1},"new":{"b":"\#(String(repeating: "q", count: 100_000))"},"old":null,"txid":"15","at":"2026-11-30T00:00:00.000000Z"}"#
        let event = try Event(payload: row)
        let kept = ReplayPages.Kept(
            page: Journal.Page(rows: (1...10).map { Journal.Row(transactionID: 15, id: $0, event: row[...]) }, isLast: true), events: (1...10).map { _ in event }
        )
        #expect(kept.prefixCount(within: 350_000) == 3)
        #expect(kept.prefixCount(within: 1) == 1, "one row at least")
        #expect(kept.prefixCount(within: kept.bytes) == 10)
    }

    @Test func aPageAReplayReadItselfIsTakenWhole() throws {
        let row = #"{"id":"1","op":"INSERT","schema":"public","table":"t","pk":{"id":1},"new":{"b":"\#(String(repeating: "q", count: 100_000))"},"old":null,"txid":"15","at":"2026-11-30T00:00:00.000000Z"}"#
        let event = try Event(payload: row)
        let kept = ReplayPages.Kept(
            page: Journal.Page(rows: (1...8).map { Journal.Row(transactionID: 15, id: $0, event: row[...]) }, isLast: true), events: (1...8).map { _ in event }
        )
        // A read stops past its limit, by up to a step's rows, and decoded events are larger than their text.
        let share = 350_000
        #expect(kept.bytes > share)
        #expect(JournalReader.rowsTaken(of: kept, byteLimit: share, readHere: true) == 8, "its own read is not cut again, nor read twice")
        #expect(JournalReader.rowsTaken(of: kept, byteLimit: share, readHere: false) == 3, "another's page is taken up to this share")
        #expect(JournalReader.rowsTaken(of: kept, byteLimit: kept.bytes, readHere: false) == 8)
    }
}
