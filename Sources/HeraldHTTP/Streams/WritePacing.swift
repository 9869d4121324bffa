package import NIOCore

/// How long the streams on one event loop wait between their writes, chosen
/// from how busy writing keeps the loop: pure, no I/O.
///
/// Each write costs a system call and a wake-up of its reader, whatever its
/// size. While the loop has headroom, every batch goes out at once, so an
/// event reaches every stream as soon as the loop can write it. Once writing
/// takes more than ``Policy/busyShare`` of the loop's time over a
/// ``Policy/window``, the loop cannot keep up for long and the writer,
/// PostgreSQL and the readers, which share the cores, are starved: the
/// streams then wait ``spacing`` between writes, and what arrives meanwhile
/// goes out together. The spacing doubles for each busy window and halves for
/// each window under ``Policy/idleShare``, down to writing at once again.
package struct WritePacing: Sendable {
    package struct Policy: Sendable {
        /// How long the loop's work is summed before the spacing is revised.
        package var window: TimeAmount = .milliseconds(20)
        /// Above this share of a window spent writing, streams wait longer.
        package var busyShare = 0.5
        /// Below this share, streams wait half as long, or not at all.
        package var idleShare = 0.2
        /// The spacing a loop starts at once it is busy.
        package var firstSpacing: TimeAmount = .milliseconds(1)
        /// The longest spacing: the latency pacing may add at most. A loop
        /// can stay busy for the events' own work, which no spacing saves:
        /// at 1,000 streams and 1,000 events/s, a 256 ms cap took the median
        /// latency from 20 ms to 40–110 ms for no less CPU.
        package var maximumSpacing: TimeAmount = .milliseconds(32)

        package init() {}
    }

    /// Whether a revision changed between writing at once and spacing writes, for the log.
    package enum Change: Equatable {
        case started(spacing: TimeAmount)
        case stopped
    }

    package let policy: Policy
    /// The wait between a stream's writes; nil: write each batch at once.
    package private(set) var spacing: TimeAmount?
    private var windowStart: NIODeadline
    private var busy: TimeAmount = .zero

    package init(policy: Policy = Policy(), now: NIODeadline) {
        self.policy = policy
        windowStart = now
    }

    /// Counts work that ran from `start` to `end` on the loop, and revises
    /// the spacing once a window has passed.
    package mutating func recordWork(from start: NIODeadline, to end: NIODeadline) -> Change? {
        busy = busy + (end - start)
        let elapsed = end - windowStart
        guard elapsed >= policy.window else { return nil }
        let share = Double(busy.nanoseconds) / Double(elapsed.nanoseconds)
        let wasSpaced = spacing != nil
        if share > policy.busyShare {
            spacing = spacing.map { min($0 * 2, policy.maximumSpacing) } ?? policy.firstSpacing
        } else if share < policy.idleShare, let current = spacing {
            // A loop that found nothing to write for several windows has been quiet that long.
            let windows = min(elapsed.nanoseconds / policy.window.nanoseconds, 62)
            let halved = TimeAmount.nanoseconds(current.nanoseconds >> windows)
            spacing = halved < policy.firstSpacing ? nil : halved
        }
        windowStart = end
        busy = .zero
        switch (wasSpaced, spacing) {
        case (false, let spacing?): return .started(spacing: spacing)
        case (true, nil): return .stopped
        default: return nil
        }
    }
}
