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

    /// After checking `checked` events in `took`: no more than the budget
    /// allows at that cost, and at most twice the last size, so that one
    /// cheap batch cannot open the way to a costly one at once.
    mutating func checked(_ checked: Int, took: Duration) {
        guard checked > 0 else { return }
        let perEvent = took / checked
        let affordable = perEvent > .zero ? Int(min(Self.budget / perEvent, Double(Self.largest))) : Self.largest
        size = max(1, min(affordable, size * 2, Self.largest))
    }
}
