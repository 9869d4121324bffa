/// The resumes waiting for their event to be looked up in the journal.
///
/// After a restart every client resumes at once, each with its own event id.
/// Looked up one by one, each pays a scan of the BRIN index's unsummarized
/// tail (milliseconds), one after another on the reader's connection: ten
/// thousand clients waited most of a minute. Instead every resume adds its id
/// here, and whichever lookup runs next on the connection takes all that
/// wait, in one query for the events and one for the checkpoints.
struct ReplayLookups: Sendable {
    /// One resume's ticket, which finds its answer after the lookup that took it.
    typealias Ticket = UInt64

    private var nextTicket: Ticket = 0
    private var waiting: [(ticket: Ticket, eventID: UInt64)] = []
    private var answered: [Ticket: Result<JournalReader.Replay, LibpqError>] = [:]

    /// Lookups a batch takes at most: a query's array stays small enough to plan well.
    static let batchLimit = 2_000

    mutating func add(_ eventID: UInt64) -> Ticket {
        nextTicket += 1
        waiting.append((nextTicket, eventID))
        return nextTicket
    }

    /// The next batch, taken out of the waiting list.
    mutating func takeBatch() -> [(ticket: Ticket, eventID: UInt64)] {
        let batch = Array(waiting.prefix(Self.batchLimit))
        waiting.removeFirst(batch.count)
        return batch
    }

    /// A batch whose lookup failed on a lost connection waits again, for the retry.
    mutating func putBack(_ batch: [(ticket: Ticket, eventID: UInt64)]) {
        waiting.insert(contentsOf: batch, at: 0)
    }

    mutating func answer(_ ticket: Ticket, with replay: Result<JournalReader.Replay, LibpqError>) {
        answered[ticket] = replay
    }

    /// The answer to `ticket`, once its batch ran; nil while it waits.
    mutating func take(_ ticket: Ticket) -> Result<JournalReader.Replay, LibpqError>? {
        answered.removeValue(forKey: ticket)
    }

    /// Forgets a ticket whose resume gave up (its lookup failed).
    mutating func cancel(_ ticket: Ticket) {
        waiting.removeAll { $0.ticket == ticket }
        answered.removeValue(forKey: ticket)
    }

    /// Ids grouped so that each group's span is narrow: the lookup reads the
    /// journal between a group's lowest and highest id, and one client far
    /// behind must not make the herd's query read the whole journal.
    static func clusters(of ids: [UInt64], widestGap: UInt64 = 10_000) -> [[UInt64]] {
        var groups: [[UInt64]] = []
        for id in Set(ids).sorted() {
            if let last = groups.last?.last, id - last <= widestGap {
                groups[groups.count - 1].append(id)
            } else {
                groups.append([id])
            }
        }
        return groups
    }
}
