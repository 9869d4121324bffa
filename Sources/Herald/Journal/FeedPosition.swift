/// How far a feed has got through the journal: a pure value, stored per
/// webhook endpoint in `pgherald.webhook_feed` and per durable output in
/// `pgherald.output_cursor`.
///
/// Every event of a transaction visible in `snapshot` has been fed. A feed
/// that hands events straight to a dispatcher takes only as many as the
/// dispatcher has room for, so it may stop inside a range: then the events of
/// `target` not in `snapshot` are fed up to `after` (a transaction, and the
/// last of its events fed), in delivery order (the journal's `JournalRange`),
/// and the rest wait in the journal.
public struct FeedPosition: Sendable, Hashable {
    /// A journal row's place in feeding order.
    public struct Row: Sendable, Hashable {
        public var transactionID: UInt64
        public var id: UInt64

        public init(transactionID: UInt64, id: UInt64) {
            self.transactionID = transactionID
            self.id = id
        }
    }

    /// The range to read next: events visible in `newer` and not in `older`, after `after`.
    public struct Range: Sendable, Hashable {
        public var newer: TransactionSnapshot
        public var older: TransactionSnapshot
        public var after: Row?
    }

    public private(set) var snapshot: TransactionSnapshot
    public private(set) var target: TransactionSnapshot?
    public private(set) var after: Row?

    public init(snapshot: TransactionSnapshot, target: TransactionSnapshot? = nil, after: Row? = nil) {
        self.snapshot = snapshot
        self.target = target
        self.after = target == nil ? nil : after
    }

    /// The range to read next, opening a new one up to `now` once the last is
    /// done; `nil` when everything visible in `now` has been fed.
    public mutating func nextRange(now: TransactionSnapshot) -> Range? {
        if target == nil {
            // A `now` from before what was fed (a bound that lags behind the database) has nothing new.
            guard snapshot != now, now.includes(snapshot) else { return nil }
            target = now
            after = nil
        }
        guard let target else { return nil }
        return Range(newer: target, older: snapshot, after: after)
    }

    /// Records the rows of one read that were fed, in order. When every row
    /// read was fed and the read came back short of its limit, the range is
    /// done and `snapshot` moves up to its end.
    public mutating func fed(through last: Row?, rangeDone: Bool) {
        guard let target else { return }
        if rangeDone {
            snapshot = target
            self.target = nil
            after = nil
        } else if let last {
            after = last
        }
    }

    /// Whether events visible in `now` still wait in the journal.
    public func isBehind(_ now: TransactionSnapshot) -> Bool {
        target != nil || snapshot != now
    }
}
