/// What one subscriber received, checked event by event.
///
/// Every stream subscribes to all tables, so the daemon's change counter
/// (`count`) must rise by exactly one from event to event: a jump is a
/// missing event, anything not above the last count a duplicate or a
/// reordering. Counts survive a resume, because the daemon replays its
/// history exactly as delivered.
struct StreamRecord {
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
        if let lastCount {
            if count > lastCount + 1 {
                missing += Int(count - lastCount - 1)
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
