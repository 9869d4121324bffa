import DequeModule

/// The most recent events in delivery order, so that a subscriber that lost
/// its connection can resume exactly where it stopped.
///
/// Bounded by both an event count and the events' encoded size; the oldest
/// go first.
struct EventHistory {
    private var events: Deque<Event> = []
    /// Event id → change count, for resumes by id.
    private var index = EventIndex()
    /// Events held that a client may not resume from (see ``append(_:resumable:)``).
    private var notResumable: Set<String> = []
    private var bytes = 0
    private var hasEvicted = false
    /// The last event a previous run of the daemon delivered before the first one held here.
    var previousRunLastEventID: String?
    let capacity: Int
    let byteLimit: Int

    init(capacity: Int, byteLimit: Int) {
        self.capacity = capacity
        self.byteLimit = byteLimit
    }

    /// Forgets every event held, for a broker whose counts jump: positions
    /// before the jump cannot be told apart from positions after it.
    mutating func forgetAll() {
        events.removeAll()
        index.removeAll()
        notResumable.removeAll()
        bytes = 0
        hasEvicted = true
    }

    /// - Parameter resumable: false keeps the event for resumes from earlier
    ///   events but not as a starting point of its own (see ``Broker/publish(_:resumable:)``).
    mutating func append(_ event: Event, resumable: Bool = true) {
        guard capacity > 0 else {
            // Not held, as if evicted at once: a resume from before it must read the journal.
            hasEvicted = true
            return
        }
        events.append(event)
        index.insert(event.id, count: event.count)
        // Hashing an id costs as much as the rest of an append: none for the empty set, the usual case.
        if !resumable {
            notResumable.insert(event.id)
        } else if !notResumable.isEmpty {
            notResumable.remove(event.id)
        }
        bytes += event.retainedBytes
        while events.count > capacity || (bytes > byteLimit && events.count > 1) {
            let evicted = events.removeFirst()
            // Unless a later event reused the id.
            if !notResumable.isEmpty, index.count(of: evicted.id) == evicted.count {
                notResumable.remove(evicted.id)
            }
            index.dropCounts(before: evicted.count + 1, evicted: evicted.id)
            bytes -= evicted.retainedBytes
            hasEvicted = true
        }
    }

    /// The events delivered after the event `id` that `filter` matches, or
    /// `nil` when the history does not reach back that far.
    func events(after id: String, matching filter: EventFilter) -> [Event]? {
        let start: Int
        if let count = changeCount(of: id), !notResumable.contains(id), let first = events.first {
            start = Int(count - first.count) + 1
        } else if id == previousRunLastEventID, !hasEvicted {
            start = 0
        } else {
            return nil
        }
        return events[start...].filter { filter.matches($0) }
    }

    /// Up to `limit` of the events after the change count `position` that
    /// `filter` matches, looking at no more than `scanLimit` events, with the
    /// position reached and whether that is the newest event; nil when the
    /// history no longer holds the event after `position`.
    func events(
        afterCount position: UInt64, matching filter: EventFilter, limit: Int, scanLimit: Int, byteLimit: Int = .max
    ) -> (events: [Event], position: UInt64, isNewest: Bool)? {
        guard let first = events.first else { return capacity > 0 && !hasEvicted ? ([], position, true) : nil }
        // Counts are consecutive here: the broker appends every event it counts.
        // A position comes from a client (a resume, a cohort's first count): checked, never trapped on.
        let (next, overflowed) = position.addingReportingOverflow(1)
        guard !overflowed, next >= first.count else { return nil }
        guard next - first.count < UInt64(events.count) else { return ([], position, true) }
        var index = Int(next - first.count)
        var found: [Event] = []
        var reached = position
        var scanned = 0
        var foundBytes = 0
        while index < events.count, found.count < limit, scanned < scanLimit {
            let event = events[index]
            if filter.matches(event) {
                // Past the first, no more than the byte limit: a stream writes what it reads at once.
                if !found.isEmpty, foundBytes + event.retainedBytes > byteLimit { break }
                found.append(event)
                foundBytes += event.retainedBytes
            }
            reached = event.count
            index += 1
            scanned += 1
        }
        return (found, reached, index >= events.count)
    }

    /// The change count the event `id` was delivered with, while it is held.
    func changeCount(of id: String) -> UInt64? {
        // The index keeps counts of events that left; counts are consecutive here, so the event is found by its count.
        guard let count = index.count(of: id), let first = events.first, count >= first.count,
              count - first.count < UInt64(events.count), events[Int(count - first.count)].id == id
        else { return nil }
        return count
    }

    var count: Int { events.count }
    var byteCount: Int { bytes }
}
