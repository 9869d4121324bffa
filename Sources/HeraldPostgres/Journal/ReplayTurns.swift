/// Whose replay takes the next page: holders take turns.
///
/// A replay's page is read on the journal reader's single connection,
/// decoded, and judged as its user under row-level security. In the order
/// they asked, one holder with ten long replays had ten pages of work ahead
/// of every page of another client's resume, which then took as long as all
/// of them. Here each holder (a user, an address, a key) has a queue of its
/// own, and the holders with pages waiting take turns, one page each: another
/// holder's resume waits for about one page of each holder replaying,
/// however many replays each runs. A few turns run at once, one fewer than
/// the cores (at least one), so that replays use the cores the live
/// deliveries and requests leave.
///
/// A value, changed under the reader's lock and unit-tested without a database.
struct ReplayTurns: Sendable {
    /// One page's turn.
    typealias Ticket = UInt64

    /// What the replay that asked, or the next one, does.
    enum Action: Equatable, Sendable {
        /// This ticket's page goes now.
        case go(Ticket)
        /// Every turn is taken: the ticket waits.
        case wait
        /// Nothing waits.
        case idle
    }

    /// Turns that run at once.
    let slots: Int
    private var nextTicket: Ticket = 0
    /// The pages in progress, by their holder.
    private var running: [Ticket: String] = [:]
    /// Holders with tickets waiting, in the order of their next turn.
    private var turns: [String] = []
    private var waiting: [String: [Ticket]] = [:]

    init(slots: Int) {
        self.slots = max(1, slots)
    }

    /// A page for `holder`: it goes at once while a turn is free, or waits its holder's turn.
    mutating func request(for holder: String) -> (Ticket, Action) {
        nextTicket += 1
        let ticket = nextTicket
        guard running.count >= slots else {
            running[ticket] = holder
            return (ticket, .go(ticket))
        }
        if waiting[holder, default: []].isEmpty { turns.append(holder) }
        waiting[holder, default: []].append(ticket)
        return (ticket, .wait)
    }

    /// `ticket`'s page is done: the next holder in turn takes its place. A holder
    /// whose page just ended, or is still in progress, lets any other that waits go
    /// first: its next page had queued while that one ran, and went ahead of a
    /// holder that came meanwhile, which then waited two of its pages, not one.
    mutating func finish(_ ticket: Ticket) -> Action {
        let finished = running.removeValue(forKey: ticket)
        guard running.count < slots, !turns.isEmpty else { return .idle }
        let busy = Set(running.values).union(finished.map { [$0] } ?? [])
        let holder = turns.remove(at: turns.firstIndex { !busy.contains($0) } ?? 0)
        var queue = waiting.removeValue(forKey: holder) ?? []
        let next = queue.removeFirst()
        if !queue.isEmpty {
            waiting[holder] = queue
            turns.append(holder)
        }
        running[next] = holder
        return .go(next)
    }
}
