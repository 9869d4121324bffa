@testable import HeraldPostgres
import Synchronization
import Testing

@Suite struct ReplayPageBudgetTests {
    @Test func aReplayIsReadAtItsShareWithinWhatItsHolderLeaves() {
        var budget = ReplayPageBudget(limit: 64, minimumShare: 4)
        let first = budget.begin(holder: "alice")
        #expect(budget.byteLimit(for: first) == 64)
        let others = (0..<3).map { _ in budget.begin(holder: "alice") }
        #expect(budget.byteLimit(for: first) == 16, "a quarter each")
        for _ in 0..<60 { _ = budget.begin(holder: "alice") }
        #expect(budget.byteLimit(for: first) == 4, "never below the least share")
        let claimed1 = budget.claim(others[0])
        #expect(claimed1)
        budget.hold(62, by: others[0])
        #expect(budget.byteLimit(for: first) == 2, "only what the holder's pages leave")
        let claimed2 = budget.claim(first)
        #expect(claimed2)
        budget.hold(5, by: first)
        #expect(budget.held(by: "alice") == 67)
        #expect(budget.byteLimit(for: others[1]) == 1, "a read takes a row at least")
    }

    @Test func aHolderWhosePagesHoldTheLimitWaitsAndOthersDoNot() {
        var budget = ReplayPageBudget(limit: 10, minimumShare: 1)
        let slow = budget.begin(holder: "alice"), next = budget.begin(holder: "alice"), bob = budget.begin(holder: "bob")
        let claimed3 = budget.claim(slow)
        #expect(claimed3)
        // One row larger than the whole budget: a holder holding nothing may always read.
        budget.hold(30, by: slow)
        let claimed4 = budget.claim(next)
        #expect(!claimed4, "alice's pages hold 30 against 10")
        let claimed5 = budget.claim(bob)
        #expect(claimed5, "bob's budget is his own")
        budget.release(slow)
        let claimed6 = budget.claim(next)
        #expect(claimed6)
    }

    @Test func claimsOfOneHolderGoOneAtATime() {
        var budget = ReplayPageBudget(limit: 10, minimumShare: 1)
        let first = budget.begin(holder: "alice"), second = budget.begin(holder: "alice")
        let claimed7 = budget.claim(first)
        #expect(claimed7)
        let claimed8 = budget.claim(second)
        #expect(!claimed8, "the first has not taken its page: its size is not known")
        let claimed9 = budget.claim(first)
        #expect(claimed9, "a claim may be made again")
        budget.hold(4, by: first)
        let claimed10 = budget.claim(second)
        #expect(claimed10)
        budget.hold(4, by: second)
        let claimed11 = budget.claim(first)
        #expect(claimed11)
        budget.hold(4, by: first)
        #expect(budget.held(by: "alice") == 12)
        let claimed12 = budget.claim(second)
        #expect(!claimed12)
    }

    @Test func anEndedReplayLetsGoOfItsPageAndItsClaim() {
        var budget = ReplayPageBudget(limit: 10, minimumShare: 1)
        let first = budget.begin(holder: "alice"), second = budget.begin(holder: "alice")
        let claimed13 = budget.claim(first)
        #expect(claimed13)
        budget.end(first)
        let claimed14 = budget.claim(second)
        #expect(claimed14, "a claim left by an ended replay does not block")
        budget.hold(20, by: second)
        let third = budget.begin(holder: "alice")
        let claimed15 = budget.claim(third)
        #expect(!claimed15)
        budget.end(second)
        #expect(budget.held(by: "alice") == 0)
        let claimed16 = budget.claim(third)
        #expect(claimed16)
    }
}

@Suite struct ReplayRoomTests {
    /// A reader that never connects: waiting for room needs no database.
    static func reader() throws -> JournalReader {
        JournalReader(connection: try ConnectionString("host=/nonexistent/pgherald-test port=1 connect_timeout=1"), daemon: "test")
    }

    @Test func aReplayWaitsForItsHoldersClaimAndGoesOnWhenItEnds() async throws {
        let reader = try Self.reader()
        let first = reader.beginReplay(of: "alice"), second = reader.beginReplay(of: "alice")
        try await reader.waitForRoom(first)
        let roomCame = Mutex(false)
        let waited = Task {
            try await reader.waitForRoom(second)
            roomCame.withLock { $0 = true }
        }
        try await Task.sleep(for: .milliseconds(100))
        #expect(!roomCame.withLock { $0 }, "the first claim has not taken its page")
        let bob = reader.beginReplay(of: "bob")
        try await reader.waitForRoom(bob)
        reader.endReplay(first)
        try await waited.value
        #expect(roomCame.withLock { $0 })
    }

    @Test func anAbandonedReplayStopsWaiting() async throws {
        let reader = try Self.reader()
        let first = reader.beginReplay(of: "alice"), second = reader.beginReplay(of: "alice")
        try await reader.waitForRoom(first)
        let waited = Task { () async -> Bool in
            do { try await reader.waitForRoom(second); return false } catch { return true }
        }
        try await Task.sleep(for: .milliseconds(100))
        reader.abandon(second)
        #expect(await waited.value, "the wait of a replay whose client left ended")
        // Abandoned before it waits: it does not wait at all.
        let third = reader.beginReplay(of: "alice")
        reader.abandon(third)
        await #expect(throws: CancellationError.self) { try await reader.waitForRoom(third) }
        // A replay that ended is not marked: its id is not kept.
        reader.endReplay(first)
        reader.abandon(first)
    }

    @Test func aPageTakenWakesTheNextWaiterWhileRoomIsLeft() async throws {
        let reader = try Self.reader()
        let slow = reader.beginReplay(of: "alice"), next = reader.beginReplay(of: "alice")
        try await reader.waitForRoom(slow)
        let roomCame = Mutex(false)
        let waited = Task {
            try await reader.waitForRoom(next)
            roomCame.withLock { $0 = true }
        }
        try await Task.sleep(for: .milliseconds(100))
        // Its client never reads, so it never asks for another page: its page is all that wakes the next.
        reader.took(1 << 20, by: slow)
        for _ in 0..<50 where !roomCame.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(100)) }
        #expect(roomCame.withLock { $0 }, "a megabyte held of 64 MiB leaves room")
        reader.abandon(next)
        _ = await waited.result
        #expect(reader.statistics.waitsForRoom == 1)
    }

    @Test func aHoldersWaitersAreWokenOneAtATime() async throws {
        let reader = try Self.reader()
        let count = 300
        let gate = reader.beginReplay(of: "alice")
        try await reader.waitForRoom(gate)
        let replays = (0..<count).map { _ in reader.beginReplay(of: "alice") }
        try await withThrowingTaskGroup { group in
            for replay in replays {
                group.addTask {
                    try await reader.waitForRoom(replay)
                    // Its read, while the others may run.
                    try await Task.sleep(for: .milliseconds(1))
                    reader.took(1, by: replay)
                    reader.endReplay(replay)
                }
            }
            // Every one waits behind the gate's claim, then they go one after another.
            for _ in 0..<100 where reader.statistics.waitsForRoom < UInt64(count) { try await Task.sleep(for: .milliseconds(20)) }
            reader.endReplay(gate)
            try await group.waitForAll()
        }
        // Each waits once, or again when woken with another and beaten to the claim; waking every
        // waiter at each page had them wait again about count² / 2 times.
        let waits = reader.statistics.waitsForRoom
        #expect(waits < UInt64(2 * count), "\(waits) waits")
    }
}
