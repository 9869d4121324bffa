/// A PostgreSQL `pg_snapshot`: which transactions had committed when it was taken.
///
/// The journal's cursors are snapshots rather than event ids, because ids are
/// taken at insert and transactions commit out of order: a transaction is
/// *visible* in a snapshot exactly when it committed before the snapshot was
/// taken (or rolled back, leaving no journal rows to find).
public struct TransactionSnapshot: Sendable, Hashable, CustomStringConvertible {
    /// Every transaction below this had finished.
    public var xmin: UInt64
    /// No transaction at or above this had finished.
    public var xmax: UInt64
    /// Transactions between `xmin` and `xmax` still in progress.
    public var inProgress: Set<UInt64>

    public init(xmin: UInt64, xmax: UInt64, inProgress: Set<UInt64> = []) {
        self.xmin = xmin
        self.xmax = xmax
        self.inProgress = inProgress
    }

    /// Parses PostgreSQL's text form, `xmin:xmax:xip,xip,...`.
    public init?(_ text: some StringProtocol) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, let xmin = UInt64(parts[0]), let xmax = UInt64(parts[1]), xmin <= xmax else { return nil }
        var inProgress: Set<UInt64> = []
        for item in parts[2].split(separator: ",") {
            guard let txid = UInt64(item), txid >= xmin, txid < xmax else { return nil }
            inProgress.insert(txid)
        }
        self.init(xmin: xmin, xmax: xmax, inProgress: inProgress)
    }

    /// Whether `transactionID` had finished when the snapshot was taken (`pg_visible_in_snapshot`).
    public func isVisible(_ transactionID: UInt64) -> Bool {
        if transactionID < xmin { return true }
        if transactionID >= xmax { return false }
        return !inProgress.contains(transactionID)
    }

    /// Whether every transaction visible in `other` is visible here too: this
    /// snapshot was taken no earlier. Conservative: false when `other` reaches
    /// past `xmax`, even if what lies beyond was all in progress there.
    public func includes(_ other: TransactionSnapshot) -> Bool {
        guard other.xmax <= xmax else { return false }
        return inProgress.allSatisfy { !other.isVisible($0) }
    }

    /// The text form PostgreSQL reads back as `pg_snapshot`.
    public var description: String {
        "\(xmin):\(xmax):" + inProgress.sorted().map(String.init).joined(separator: ",")
    }
}
