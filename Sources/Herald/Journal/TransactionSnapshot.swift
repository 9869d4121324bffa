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

    /// Parses PostgreSQL's text form, `xmin:xmax:xip,xip,...`. Byte by
    /// byte, without splitting: every sweep reads one.
    public init?(_ text: some StringProtocol) {
        var numbers: [UInt64] = []
        var current: UInt64?
        var colons = 0
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                let (times10, overflow) = (current ?? 0).multipliedReportingOverflow(by: 10)
                let (sum, carry) = times10.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
                guard !overflow, !carry else { return nil }
                current = sum
            case UInt8(ascii: ":"):
                guard let number = current, colons < 2 else { return nil }
                numbers.append(number)
                current = nil
                colons += 1
            case UInt8(ascii: ","):
                guard let number = current, colons == 2 else { return nil }
                numbers.append(number)
                current = nil
            default:
                return nil
            }
        }
        if let current { numbers.append(current) } else if numbers.count > 2 { return nil }
        guard colons == 2, numbers.count >= 2, numbers[0] <= numbers[1] else { return nil }
        let (xmin, xmax) = (numbers[0], numbers[1])
        var inProgress: Set<UInt64> = []
        for txid in numbers.dropFirst(2) {
            guard txid >= xmin, txid < xmax else { return nil }
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
        var text = "\(xmin):\(xmax):"
        for (index, txid) in inProgress.sorted().enumerated() {
            if index > 0 { text += "," }
            text += String(txid)
        }
        return text
    }
}
