public import Herald
import DequeModule
import Glibc
import Synchronization

/// Reads the journal for socket clients that resume from an event older than
/// the broker's in-memory history.
public final class JournalReader: Sendable {
    /// What a resuming client missed.
    public enum Replay: Sendable {
        /// The missed events are in the journal; read them page by page.
        case journal(ReplayCursor)
        /// The position cannot be found (older than retention, or never
        /// delivered by this daemon): the client must refetch everything.
        case reset(reason: String)
    }

    /// A position in a replay, in delivery order (see ``JournalRange``).
    public struct ReplayCursor: Sendable {
        /// Live events from transactions visible in this snapshot are in the replay and must be skipped.
        public let covering: TransactionSnapshot
        let since: TransactionSnapshot
        let resumedTransactionID: UInt64
        let resumedEventID: UInt64
        /// Transactions of the range that were delivered before the resumed one: skipped.
        let deliveredBefore: Set<UInt64>
        var after: (transactionID: UInt64, id: UInt64)?
        var range: JournalRange
        public internal(set) var isFinished = false

        init(
            covering: TransactionSnapshot, since: TransactionSnapshot, resumedTransactionID: UInt64, resumedEventID: UInt64,
            deliveredBefore: Set<UInt64> = []
        ) {
            self.covering = covering
            self.since = since
            self.resumedTransactionID = resumedTransactionID
            self.resumedEventID = resumedEventID
            self.deliveredBefore = deliveredBefore
            range = JournalRange(older: since, newer: covering)
        }
    }

    let daemon: String
    /// Journal rows read per page (a batch row holds up to 100 events).
    public let pageSize: Int
    /// About the most bytes of events the pages of one holder's replays
    /// hold together, past each page's first journal row: a page is held
    /// while its reader serves it, and 500 rows of 1 MB were 500 MB for one
    /// slow client, as many times as it had streams. Shared equally by the
    /// holder's replays running at once, and at least ``minimumPageBytes``
    /// each. 64 MiB: a replay reads every row of its range, the rows it does
    /// not follow too, and each page is a turn that waits for other holders'
    /// turns. At 16 MiB a replay whose one row came after another user's
    /// 40 MB statement read it in three pages, each after one of that user's
    /// replays judged a page, and waited 1.1–1.5 s for its row, against 0.14 s.
    public static let pageByteLimit = 64 << 20
    /// The least bytes a page may be read at however many replays its holder runs.
    static let minimumPageBytes = 1 << 20
    /// What each holder's running replays hold (``beginReplay(of:)``), and the replays waiting for room.
    private let budget = Mutex(BudgetState())
    private let connection: SerialConnection
    private let lookups = Mutex(ReplayLookups())
    private let pages = Mutex(ReplayPages())
    private let counts = Mutex(DaemonStatistics.Replays())
    /// One turn fewer than the cores: the async runtime has a thread a core, and replays that
    /// filled them all kept every request and live delivery of the daemon waiting behind their pages.
    private let turns = Mutex(TurnState(turns: ReplayTurns(slots: sysconf(Int32(_SC_NPROCESSORS_ONLN)) - 1)))
    private let deliveries: DeliveryRecord?

    /// ``ReplayPageBudget`` and the replays waiting for room in it.
    private struct BudgetState {
        var budget = ReplayPageBudget(limit: JournalReader.pageByteLimit, minimumShare: JournalReader.minimumPageBytes)
        var waiting: [UInt64: CheckedContinuation<Void, Never>] = [:]
        /// Each holder's waiting replays in the order they came; an id whose wait
        /// ended otherwise (``abandon(_:)``) is passed over when its turn comes.
        var queues: [String: Deque<UInt64>] = [:]
        /// Running replays whose clients left (``abandon(_:)``).
        var abandoned: Set<UInt64> = []

        mutating func wait(_ replay: ReplayPageBudget.Replay, _ continuation: CheckedContinuation<Void, Never>, first: Bool) {
            waiting[replay.id] = continuation
            if first { queues[replay.holder, default: []].prepend(replay.id) } else { queues[replay.holder, default: []].append(replay.id) }
        }

        /// Takes the first of `holder`'s waiters, to be resumed outside the lock,
        /// when a claim of its would be granted. One at a time, as claims go:
        /// waking all of a holder's ten thousand waiters at each page, for one
        /// to claim and the rest to wait again, cost the square of their number.
        mutating func nextWaiter(of holder: String) -> CheckedContinuation<Void, Never>? {
            guard budget.hasRoom(for: holder) else {
                // The ids left are of replays whose clients left.
                if !budget.runsReplays(of: holder) { queues[holder] = nil }
                return nil
            }
            while let id = queues[holder]?.popFirst() {
                if let continuation = waiting.removeValue(forKey: id) { return continuation }
            }
            queues[holder] = nil
            return nil
        }
    }

    /// ``ReplayTurns`` and the readers waiting for theirs.
    private struct TurnState {
        var turns: ReplayTurns
        var waiting: [ReplayTurns.Ticket: CheckedContinuation<Void, Never>] = [:]
        var granted: Set<ReplayTurns.Ticket> = []
    }

    /// - Parameter deliveries: the listener's record of recent deliveries, which makes their replays exact.
    public init(connection: ConnectionString, daemon: String, deliveries: DeliveryRecord? = nil, pageSize: Int = 500) {
        self.connection = SerialConnection(connection, applicationName: "pgherald-journal")
        self.daemon = daemon
        self.deliveries = deliveries
        self.pageSize = pageSize
    }

    /// Bytes of decoded events in the pages kept for other readers now.
    public var keptPageBytes: Int {
        pages.withLock { $0.keptBytes }
    }

    /// What resuming clients have cost the journal since start.
    public var statistics: DaemonStatistics.Replays {
        counts.withLock { $0 }
    }

    /// Where the events that this daemon delivered, or will deliver, after
    /// event `eventID` begin.
    ///
    /// For a transaction this daemon delivered lately (``DeliveryRecord``),
    /// the replay starts where its delivery step did and skips what that
    /// step delivered before it: nothing repeats. After the last event a
    /// graceful stop delivered, it starts at that stop's checkpoint, which
    /// covers exactly what was delivered: nothing repeats either. Otherwise
    /// it starts at the last checkpoint recorded before the event's
    /// transaction committed, so nothing is skipped; events between that
    /// checkpoint and `eventID` may be repeated (with their ids).
    ///
    /// Resumes that arrive together are looked up together (``ReplayLookups``).
    public func replay(after eventID: UInt64) async throws(LibpqError) -> Replay {
        let ticket = lookups.withLock { $0.add(eventID) }
        do {
            // Runs after every lookup queued before it: by its end, an earlier one took this ticket or it takes it itself.
            try await connection.run { [self] connection throws(LibpqError) in try lookUpWaiting(on: connection) }
        } catch {
            lookups.withLock { $0.cancel(ticket) }
            throw error
        }
        guard let replay = lookups.withLock({ $0.take(ticket) }) else {
            throw LibpqError(.queryFailed, "the journal lookup of event \(eventID) was lost")
        }
        return try replay.get()
    }

    /// Looks up every resume waiting, a batch at a time. A batch whose
    /// connection was lost waits again for the retry on a new one; another
    /// failure is each of its resumes' answer.
    private func lookUpWaiting(on connection: LibpqConnection) throws(LibpqError) {
        while case let batch = lookups.withLock({ $0.takeBatch() }), !batch.isEmpty {
            let answers: [UInt64: Replay]
            do {
                answers = try lookUp(batch.map(\.eventID), on: connection)
            } catch where error.code == .connectionLost {
                lookups.withLock { $0.putBack(batch) }
                throw error
            } catch {
                lookups.withLock { waiting in for entry in batch { waiting.answer(entry.ticket, with: .failure(error)) } }
                continue
            }
            lookups.withLock { waiting in
                for entry in batch { waiting.answer(entry.ticket, with: .success(answers[entry.eventID] ?? .reset(reason: "event \(entry.eventID) is not in the journal"))) }
            }
            counts.withLock {
                $0.resumes += UInt64(batch.count)
                $0.lookups += 1
            }
        }
    }

    /// The replays of `eventIDs`, which share one snapshot, so that those
    /// whose events followed the same checkpoint read the same range.
    private func lookUp(_ eventIDs: [UInt64], on connection: LibpqConnection) throws(LibpqError) -> [UInt64: Replay] {
        let now = try Journal.currentSnapshot(on: connection)
        var transactionOf: [UInt64: UInt64] = [:]
        for cluster in ReplayLookups.clusters(of: eventIDs) {
            for row in try Journal.events(ids: cluster, on: connection) { transactionOf[row.id] = row.transactionID }
        }
        var answers: [UInt64: Replay] = [:]
        for (eventID, transactionID) in transactionOf {
            guard let position = deliveries?.position(of: transactionID) else { continue }
            answers[eventID] = .journal(ReplayCursor(
                covering: now, since: position.older, resumedTransactionID: transactionID, resumedEventID: eventID,
                deliveredBefore: position.deliveredBefore
            ))
        }
        let unplaced = transactionOf.filter { answers[$0.key] == nil }
        guard !unplaced.isEmpty || transactionOf.count < eventIDs.count else { return answers }
        let checkpoints = try Journal.checkpoints(of: daemon, before: Array(Set(unplaced.values)), on: connection)
        let finalCheckpoints = try Journal.finalCheckpoints(of: daemon, lastEventIDs: Array(unplaced.keys), on: connection)
        for eventID in eventIDs where answers[eventID] == nil {
            guard let transactionID = transactionOf[eventID] else {
                answers[eventID] = .reset(reason: "event \(eventID) is not in the journal (older than retention, or unknown)")
                continue
            }
            guard let checkpoint = finalCheckpoints[eventID] ?? checkpoints[transactionID] else {
                answers[eventID] = .reset(reason: "event \(eventID) was not delivered by this daemon")
                continue
            }
            answers[eventID] = .journal(ReplayCursor(covering: now, since: checkpoint, resumedTransactionID: transactionID, resumedEventID: eventID))
        }
        return answers
    }

    /// Whether `event` is the last its committed transaction wrote: for an
    /// event delivered before anything asked for transaction ends to be marked.
    /// True for an event sent by hand, which has no journal position.
    public func endsTransaction(_ event: Event) async throws(LibpqError) -> Bool {
        guard let transactionID = UInt64(event.transactionID), let id = UInt64(event.id) else { return true }
        let last = try await connection.run { connection throws(LibpqError) in
            try Journal.lastEventID(ofTransaction: transactionID, on: connection)
        }
        return last.map { $0 <= id } ?? true
    }

    /// A replay of `holder`'s that runs until ``endReplay(_:)``.
    public struct RunningReplay: Sendable {
        let budgeted: ReplayPageBudget.Replay
    }

    /// Counts a replay of `holder`'s as running: its pages share ``pageByteLimit`` with the holder's other replays.
    public func beginReplay(of holder: String) -> RunningReplay {
        RunningReplay(budgeted: budget.withLock { $0.budget.begin(holder: holder) })
    }

    public func endReplay(_ replay: RunningReplay) {
        let waiter = budget.withLock { state in
            state.budget.end(replay.budgeted)
            state.abandoned.remove(replay.budgeted.id)
            return state.nextWaiter(of: replay.budgeted.holder)
        }
        waiter?.resume()
    }

    /// Lets go of the page `replay` read last, which its client has been sent,
    /// and returns once its holder's pages leave room for the next
    /// (``ReplayPageBudget``): a replay whose client does not read keeps its
    /// page, and its holder's other replays wait for that room, not everyone's.
    /// Call it before the turn whose ``nextPage(_:of:matching:)`` reads the page.
    /// - Throws: `CancellationError` once the replay is abandoned.
    public func waitForRoom(_ replay: RunningReplay) async throws(CancellationError) {
        let id = replay.budgeted.id
        let waiter = budget.withLock { state in
            state.budget.release(replay.budgeted) ? state.nextWaiter(of: replay.budgeted.holder) : nil
        }
        waiter?.resume()
        var woken = false
        while true {
            let claimed = budget.withLock { state in state.abandoned.contains(id) ? nil : state.budget.claim(replay.budgeted) }
            guard let claimed else { throw CancellationError() }
            if claimed { return }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = budget.withLock { state in
                    if state.abandoned.contains(id) || state.budget.claim(replay.budgeted) { return true }
                    // Woken and beaten to the claim: it keeps its place at the front.
                    state.wait(replay.budgeted, continuation, first: woken)
                    return false
                }
                if ready {
                    continuation.resume()
                } else {
                    counts.withLock { $0.waitsForRoom += 1 }
                }
            }
            woken = true
        }
    }

    /// Ends `replay`'s wait for room, now or when it comes to wait: its
    /// client left. A wait that outlived its client held a stream slot for as
    /// long as another of its holder's clients kept the room by not reading.
    public func abandon(_ replay: RunningReplay) {
        let waiter = budget.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.budget.isRunning(replay.budgeted) else { return nil }
            state.abandoned.insert(replay.budgeted.id)
            return state.waiting.removeValue(forKey: replay.budgeted.id)
        }
        waiter?.resume()
    }

    /// Records the page `replay` took, which ends its claim, and wakes the
    /// next of its holder's waiters: the room left may be enough for another
    /// page. When only a page let go woke them, a replay waited behind one
    /// whose client did not read while its holder held far under the budget.
    func took(_ bytes: Int, by replay: RunningReplay) {
        let waiter = budget.withLock { state in
            state.budget.hold(bytes, by: replay.budgeted)
            return state.nextWaiter(of: replay.budgeted.holder)
        }
        waiter?.resume()
    }

    /// The next page of a replay that `filter` matches; may be empty even
    /// before the end. Sets `isFinished` after the last page. A page another
    /// replay of the same range read lately is not read again.
    ///
    /// Called in its holder's turn (``inTurn(of:after:judged:_:)``).
    public func nextPage(_ cursor: inout ReplayCursor, of replay: RunningReplay, matching filter: EventFilter) async throws(LibpqError) -> [Event] {
        let byteLimit = budget.withLock { $0.budget.byteLimit(for: replay.budgeted) }
        let current = cursor
        let kept: ReplayPages.Kept
        let range: JournalRange
        let readHere: Bool
        if let shared = keptPage(after: current) {
            (kept, range, readHere) = (shared.0, shared.1, false)
        } else {
            (kept, range, readHere) = try await connection.run { [self] connection throws(LibpqError) in
                // Another reader of the range may have read it while this one waited.
                if let shared = keptPage(after: current) { return (shared.0, shared.1, false) }
                let read = try readPage(after: current, byteLimit: byteLimit, on: connection)
                return (read.0, read.1, true)
            }
        }
        let taken = Self.rowsTaken(of: kept, byteLimit: byteLimit, readHere: readHere)
        took(kept.bytes(ofFirst: taken), by: replay)
        var events: [Event] = []
        for (row, event) in zip(kept.positions.prefix(taken), kept.events) {
            // The resumed event's own transaction delivered its events in id order.
            if row.transactionID == current.resumedTransactionID, row.id <= current.resumedEventID { continue }
            if current.deliveredBefore.contains(row.transactionID) { continue }
            if let event, filter.matches(event) {
                events.append(event)
            }
        }
        cursor.range = range
        cursor.after = kept.positions.prefix(taken).last.map { ($0.transactionID, $0.id) } ?? current.after
        cursor.isFinished = kept.isLast && taken == kept.positions.count
        return events
    }

    /// The rows of `kept` a replay whose share is `byteLimit` takes. A page
    /// another replay read with a larger share is taken up to this one's
    /// own: twenty slow replays of one user's shared a 40 MB page, and each
    /// framed all of it. A page this replay read (`readHere`) is whole: its
    /// read counted it against the share as text, and cutting it again by its
    /// decoded size, which is larger, had the rest read twice.
    static func rowsTaken(of kept: ReplayPages.Kept, byteLimit: Int, readHere: Bool) -> Int {
        readHere || kept.bytes <= byteLimit ? kept.positions.count : kept.prefixCount(within: byteLimit)
    }

    /// Runs `body`, a replay's work on the page after `cursor` (its read,
    /// decoding, and judging as its user), in `holder`'s turn (``ReplayTurns``).
    ///
    /// A small page that another replay read lately, kept decoded, needs no turn
    /// unless it is to be judged: filtering and framing it costs well under a
    /// millisecond, less than waiting for a turn. A herd of ten thousand resumes of
    /// one range, each waiting its turn for such a page, took 1.5 s longer than the
    /// same herd from memory.
    /// - Parameter judged: the page is judged under row-level security, at the database's cost.
    public func inTurn<Value>(
        of holder: String, after cursor: ReplayCursor, judged: Bool, _ body: () async throws -> Value
    ) async rethrows -> Value {
        if !judged, keepsSmallPage(after: cursor) { return try await body() }
        let ticket = await takeTurn(for: holder)
        defer { endTurn(ticket) }
        return try await body()
    }

    private func keepsSmallPage(after cursor: ReplayCursor) -> Bool {
        let key = pageKey(after: cursor)
        let now = ContinuousClock.now
        return pages.withLock { $0.page(key, now: now) }.map { $0.positions.count <= Self.smallPage } ?? false
    }

    /// The most events a kept page may hold to be read without a turn.
    static let smallPage = 1_000

    private func pageKey(after cursor: ReplayCursor) -> ReplayPages.Key {
        ReplayPages.Key(
            older: cursor.range.older, newer: cursor.range.newer,
            afterTransactionID: cursor.after?.transactionID ?? 0, afterEventID: cursor.after?.id ?? 0
        )
    }

    /// The page after `cursor`'s position if another reader of the same range read it lately.
    private func keptPage(after cursor: ReplayCursor) -> (ReplayPages.Kept, JournalRange)? {
        let key = pageKey(after: cursor)
        let now = ContinuousClock.now
        let (kept, shared) = pages.withLock { ($0.page(key, now: now), $0.range(older: key.older, newer: key.newer)) }
        guard let kept else { return nil }
        counts.withLock { $0.pagesShared += 1 }
        return (kept, shared ?? cursor.range)
    }

    /// Reads the page after `cursor`'s position, and keeps it for the readers after it.
    private func readPage(
        after cursor: ReplayCursor, byteLimit: Int, on connection: LibpqConnection
    ) throws(LibpqError) -> (ReplayPages.Kept, JournalRange) {
        let key = pageKey(after: cursor)
        var range = pages.withLock { $0.range(older: key.older, newer: key.newer) } ?? cursor.range
        let kept = ReplayPages.Kept(try range.page(after: cursor.after, limit: pageSize, byteLimit: byteLimit, on: connection))
        if pages.withLock({ [range] in $0.store(kept, for: key, range: range, now: .now) }) { sweepExpiredPages() }
        counts.withLock { $0.pagesRead += 1 }
        return (kept, range)
    }

    /// Drops kept pages as their lifetime ends, until none is left: with no
    /// reader after them, pages of large rows stayed until the next replay,
    /// which may never come.
    private func sweepExpiredPages() {
        Task { [weak self] in
            repeat {
                try? await Task.sleep(for: ReplayPages.lifetime)
            } while self?.pages.withLock({ $0.sweep(now: .now) }) == true
        }
    }

    /// Returns when it is `holder`'s turn, with the turn's ticket.
    private func takeTurn(for holder: String) async -> ReplayTurns.Ticket {
        let (ticket, action) = turns.withLock { $0.turns.request(for: holder) }
        guard action == .wait else { return ticket }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = turns.withLock { state in
                if state.granted.remove(ticket) != nil { return true }
                state.waiting[ticket] = continuation
                return false
            }
            if granted { continuation.resume() }
        }
        return ticket
    }

    /// Passes `ticket`'s turn to the next holder in turn.
    private func endTurn(_ ticket: ReplayTurns.Ticket) {
        let next: CheckedContinuation<Void, Never>? = turns.withLock { state in
            guard case .go(let next) = state.turns.finish(ticket) else { return nil }
            guard let waiting = state.waiting.removeValue(forKey: next) else {
                // Its replay has not begun to wait yet: it finds the turn granted.
                state.granted.insert(next)
                return nil
            }
            return waiting
        }
        next?.resume()
    }
}
