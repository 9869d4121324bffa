/// The bytes of pages that each holder's replays hold at once, against one
/// budget a holder.
///
/// A page ends with the row that takes it past its byte limit, so a share
/// of the budget for each replay still let every replay hold a whole row: a
/// hundred of one user's replays of 10 MB rows that never read held 1.3 GB.
/// Here a replay claims room before it reads its next page, and only while
/// its holder's pages hold less than the budget; claims of one holder go one
/// at a time, so that the next claim sees what the last page held. What one
/// holder's pages hold is at most the budget and one row.
struct ReplayPageBudget: Sendable {
    /// A replay, from ``begin(holder:)`` to ``end(_:)``.
    struct Replay: Hashable, Sendable {
        let holder: String
        let id: UInt64
    }

    /// The bytes one holder's pages may hold together.
    let limit: Int
    /// The least share of ``limit`` a replay's page is read at.
    let minimumShare: Int
    private var nextID: UInt64 = 0
    private var running: Set<Replay> = []
    private var heldByReplay: [Replay: Int] = [:]
    private var holders: [String: Holder] = [:]

    private struct Holder {
        var replays = 0
        var held = 0
        /// The replay that claimed room and has not yet taken its page.
        var claimant: Replay?
    }

    init(limit: Int, minimumShare: Int) {
        self.limit = limit
        self.minimumShare = minimumShare
    }

    mutating func begin(holder: String) -> Replay {
        nextID += 1
        holders[holder, default: Holder()].replays += 1
        let replay = Replay(holder: holder, id: nextID)
        running.insert(replay)
        return replay
    }

    /// Lets go of what `replay` holds, and its claim.
    mutating func end(_ replay: Replay) {
        guard running.remove(replay) != nil else { return }
        release(replay)
        guard var holder = holders[replay.holder] else { return }
        holder.replays -= 1
        if holder.claimant == replay { holder.claimant = nil }
        holders[replay.holder] = holder.replays > 0 ? holder : nil
    }

    /// Lets go of the page `replay` holds: it has sent it and wants the next.
    /// - Returns: whether it held one.
    @discardableResult
    mutating func release(_ replay: Replay) -> Bool {
        guard let bytes = heldByReplay.removeValue(forKey: replay) else { return false }
        holders[replay.holder]?.held -= bytes
        return true
    }

    /// Whether a claim of `holder`'s would be granted now: no claim is
    /// outstanding, and its pages hold less than the limit, or nothing.
    func hasRoom(for holder: String) -> Bool {
        guard let holder = holders[holder] else { return false }
        return holder.claimant == nil && (holder.held < limit || holder.held == 0)
    }

    /// Claims room for `replay`'s next page: true when its holder's pages
    /// hold less than the limit, or nothing, and no other replay of the
    /// holder has claimed room and not yet taken its page.
    mutating func claim(_ replay: Replay) -> Bool {
        guard var holder = holders[replay.holder], holder.claimant == replay || hasRoom(for: replay.holder) else { return false }
        holder.claimant = replay
        holders[replay.holder] = holder
        return true
    }

    /// The bytes `replay`'s next page may be read at: its share of the
    /// limit, within what its holder's pages leave; at least one byte, so
    /// a read always takes a row.
    func byteLimit(for replay: Replay) -> Int {
        guard let holder = holders[replay.holder] else { return minimumShare }
        let share = max(minimumShare, limit / max(1, holder.replays))
        return max(1, min(share, limit - holder.held))
    }

    /// Records the page `replay` took, which ends its claim.
    mutating func hold(_ bytes: Int, by replay: Replay) {
        heldByReplay[replay, default: 0] += bytes
        holders[replay.holder]?.held += bytes
        if holders[replay.holder]?.claimant == replay { holders[replay.holder]?.claimant = nil }
    }

    /// Whether `holder` has a replay running.
    func runsReplays(of holder: String) -> Bool {
        holders[holder] != nil
    }

    func isRunning(_ replay: Replay) -> Bool {
        running.contains(replay)
    }

    /// What `holder`'s pages hold now.
    func held(by holder: String) -> Int {
        holders[holder]?.held ?? 0
    }
}
