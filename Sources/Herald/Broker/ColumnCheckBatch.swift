/// How many events a callback-driven consumer takes at once when it checks
/// their columns itself (``Subscription/pollDelivery(limit:)``): as many as
/// fit in a batch's budget at the cost the last checks showed, so that cheap
/// conditions go in large batches and a costly one (a `like` over long rows)
/// one event at a time, between which the consumer's loop lets others run.
struct ColumnCheckBatch: Sendable, Hashable {
    /// The checking one batch may cost.
    static let budget: Duration = .milliseconds(1)
    /// A ceiling for the size; the caller's own limit is usually lower.
    static let largest = 1 << 16

    /// Events to take next. Starts at one: nothing is known of the cost yet.
    private(set) var size = 1
    /// What the last checks cost an event; nil before the first.
    private(set) var perEvent: Duration?
    /// Whether the checks are taken for costly until they are measured: a `like` pattern may be.
    private let startsCostly: Bool

    /// - Parameter startsCostly: whether the checks go to ``ColumnCheckLane`` until measured, so
    ///   that a costly first check does not hold up the delivering thread it would run on.
    init(startsCostly: Bool = false) {
        self.startsCostly = startsCostly
    }

    /// Whether the checks cost enough an event to go to ``ColumnCheckLane``.
    var isCostly: Bool { perEvent.map { $0 > ColumnCheckLane.costlyPerEvent } ?? startsCostly }

    /// After checking `checked` events in `took`: no more than the budget
    /// allows at that cost, and at most twice the last size, so that one
    /// cheap batch cannot open the way to a costly one at once.
    mutating func checked(_ checked: Int, took: Duration) {
        guard checked > 0 else { return }
        let perEvent = took / checked
        self.perEvent = perEvent
        let affordable = perEvent > .zero ? Int(min(Self.budget / perEvent, Double(Self.largest))) : Self.largest
        size = max(1, min(affordable, size * 2, Self.largest))
    }
}
