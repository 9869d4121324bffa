/// What one subscriber received, checked event by event.
///
/// Every stream subscribes to all tables, so the daemon's change counter
/// (`count`) must rise by exactly one from event to event: a jump is a
/// missing event, anything not above the last count a duplicate or a
/// reordering. Counts survive a resume, because the daemon replays its
/// history exactly as delivered.
///
/// A stream that sees one team's rows under row-level security gets every
/// `stride`-th row id, each congruent to its team: ids rise by `stride`, and
/// an id of another team is a leak.
struct StreamRecord {
    var stride: UInt64 = 1
    /// The team's remainder of `id % stride`; nil when the stream sees every row.
    var team: UInt64?
    /// Rows of another team: a leak.
    var foreign = 0
    var received = 0
    var missing = 0
    var duplicatedOrReordered = 0
    var resumes = 0
    var overflows = 0
    var lastCount: UInt64?
    var lastEventID: Substring?
    var firstReceiptMicroseconds: Int64 = 0
    var lastReceiptMicroseconds: Int64 = 0
    /// Receipt minus the event's `at`, in microseconds.
    var latencies: [Int32] = []

    mutating func record(count: UInt64, at: Int64, now: Int64) {
        received += 1
        if let team, count % stride != team { foreign += 1 }
        if let lastCount {
            if count > lastCount + stride {
                missing += Int((count - lastCount) / stride - 1)
            } else if count <= lastCount {
                duplicatedOrReordered += 1
            }
        }
        lastCount = max(count, lastCount ?? 0)
        if received == 1 { firstReceiptMicroseconds = now }
        lastReceiptMicroseconds = now
        latencies.append(Int32(clamping: now - at))
    }
}
