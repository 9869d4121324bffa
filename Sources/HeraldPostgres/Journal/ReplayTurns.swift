/// Whose replay reads the journal's next page: holders take turns.
///
/// Replays read pages one at a time on the reader's single connection. In
/// the order they asked, one holder with a hundred long replays queued a
/// hundred page reads ahead of every other client's resume, which then
/// waited for all of them. Here each holder (a user, an address, a key) has
/// a queue of its own, and the holders with pages to read take turns, one
/// page each: another holder's resume waits for at most one page of each
/// holder that is reading, however many replays each runs.
///
/// A value, changed under the reader's lock and unit-tested without a database.
struct ReplayTurns: Sendable {
    /// One page read waiting for its turn.
    typealias Ticket = UInt64

    /// What the reader does next.
    enum Action: Equatable, Sendable {
        /// The connection is free: this ticket reads its page now.
        case read(Ticket)
        /// Every page waits for the one being read.
        case wait
        /// Nothing waits.
        case idle
    }

    private var nextTicket: Ticket = 0
    private var reading: Ticket?
    /// Holders with tickets waiting, in the order of their next turn.
    private var turns: [String] = []
    private var waiting: [String: [Ticket]] = [:]

    /// A page read for `holder`: it reads at once when the connection is
    /// free, or waits its holder's turn.
    mutating func request(for holder: String) -> (Ticket, Action) {
        nextTicket += 1
        let ticket = nextTicket
        guard reading != nil else {
            reading = ticket
            return (ticket, .read(ticket))
        }
        if waiting[holder, default: []].isEmpty { turns.append(holder) }
        waiting[holder, default: []].append(ticket)
        return (ticket, .wait)
    }

    /// The page being read is done: the next holder in turn reads one.
    mutating func finish() -> Action {
        reading = nil
        guard !turns.isEmpty else { return .idle }
        let holder = turns.removeFirst()
        var queue = waiting.removeValue(forKey: holder) ?? []
        let ticket = queue.removeFirst()
        if !queue.isEmpty {
            waiting[holder] = queue
            turns.append(holder)
        }
        reading = ticket
        return .read(ticket)
    }
}
