public import Herald

/// The events committed between two snapshots, read page by page in
/// delivery order: transaction by transaction, each transaction placed by
/// the last event it wrote, and within one in the order it wrote them.
///
/// Why the last event: a transaction that waits for another's row lock
/// writes that row, and so its journal row, only after the other committed,
/// and event ids are taken from a sequence as rows are written. So of two
/// transactions that wrote the same row, the one that committed first wrote
/// its last event first, whatever their transaction ids. More generally, a
/// transaction that committed before another wrote its last event comes
/// before it. Transaction ids say only which began writing first.
///
/// A range that fits one page is read with one query and put in order as
/// it comes. A longer one first lists its transactions with their last
/// event (one query, kept for later pages: the range's transactions have
/// all committed, so the list is final), then reads them in that order.
public struct JournalRange: Sendable {
    /// One transaction of the range, as the list of a long range holds it.
    public struct Transaction: Sendable, Hashable {
        public var id: UInt64
        /// The id of the last event it wrote, which places it.
        public var lastEventID: UInt64
        /// Its journal rows (a statement's batch of events is one row).
        public var rows: Int
    }

    public let older: TransactionSnapshot
    public let newer: TransactionSnapshot
    /// Every transaction of the range in delivery order, once a read needed it.
    private(set) var transactions: [Transaction]?
    private var positions: [UInt64: Int] = [:]

    public init(older: TransactionSnapshot, newer: TransactionSnapshot) {
        self.older = older
        self.newer = newer
    }

    /// The events after `after` (a transaction and the last event of it
    /// already read; nil: from the start), from up to `limit` journal rows,
    /// and with a `byteLimit`, no more rows than hold about that many bytes.
    public mutating func page(
        after: (transactionID: UInt64, id: UInt64)?, limit: Int, byteLimit: Int? = nil, on connection: LibpqConnection
    ) throws(LibpqError) -> Journal.Page {
        if after == nil, transactions == nil {
            let raw = try Journal.events(visibleIn: newer, notVisibleIn: older, limit: limit, byteLimit: byteLimit, on: connection)
            return try firstPage(from: raw, limit: limit, byteLimit: byteLimit, on: connection)
        }
        let transactions = try listTransactions(on: connection)
        var index = 0
        // The last event read of transactions[index]; 0: none.
        var readThrough: UInt64 = 0
        // A position whose transaction is no longer in the journal (pruned while its reader stood still longer
        // than the retention) reads the range from its start: repeated events rather than a reader stuck for good.
        if let after, let position = positions[after.transactionID] {
            index = position
            readThrough = after.id
        }
        // A read that finds nothing (its transactions were pruned meanwhile) goes on to the next: a page is empty only at the end.
        while index < transactions.count {
            let transaction = transactions[index]
            if readThrough >= transaction.lastEventID {
                index += 1
                readThrough = 0
                continue
            }
            if readThrough > 0 || transaction.rows > limit {
                // The rest of a transaction a page stopped inside, or the start of one longer than a page: a page of its own.
                let rows = try Journal.events(transactionID: transaction.id, after: readThrough, limit: limit, byteLimit: byteLimit, on: connection)
                guard let last = rows.last else {
                    index += 1
                    readThrough = 0
                    continue
                }
                return Journal.Page(rows: rows, isLast: last.id >= transaction.lastEventID && index == transactions.count - 1)
            }
            var wanted: [UInt64] = []
            var budget = limit
            while index < transactions.count, transactions[index].rows <= budget {
                wanted.append(transactions[index].id)
                budget -= transactions[index].rows
                index += 1
            }
            let (rows, isComplete) = try Journal.events(transactionIDs: wanted, byteLimit: byteLimit, on: connection)
            if !rows.isEmpty || index == transactions.count {
                // Cut short, the next page goes on inside the transaction where this one stopped.
                return Journal.Page(rows: rows, isLast: isComplete && index == transactions.count)
            }
        }
        return Journal.Page(rows: [], isLast: true)
    }

    /// The range's transactions in delivery order, read once: at the first
    /// page, or earlier by a caller that knows the range is longer than one.
    @discardableResult
    public mutating func listTransactions(on connection: LibpqConnection) throws(LibpqError) -> [Transaction] {
        if let transactions { return transactions }
        let listed = try Journal.transactions(visibleIn: newer, notVisibleIn: older, on: connection)
        transactions = listed
        positions = Dictionary(uniqueKeysWithValues: listed.enumerated().map { ($0.element.id, $0.offset) })
        return listed
    }

    /// Rows of whole transactions, as a read in (transaction id, event id)
    /// order brings them, put in delivery order: each transaction by its last
    /// event, its own events in the order they were written.
    public static func inDeliveryOrder(_ rows: [Journal.Row]) -> [Journal.Row] {
        // A transaction's rows come together and in id order, so its last row holds its last event.
        var transactions: [(rows: Range<Int>, lastEventID: UInt64)] = []
        var start = rows.startIndex
        for index in rows.indices {
            let next = index + 1
            guard next == rows.endIndex || rows[next].transactionID != rows[index].transactionID else { continue }
            transactions.append((start..<next, rows[index].id))
            start = next
        }
        // Already in order in the common case: one transaction, or transaction ids that agree.
        if zip(transactions, transactions.dropFirst()).allSatisfy({ $0.lastEventID < $1.lastEventID }) { return rows }
        return transactions.sorted { $0.lastEventID < $1.lastEventID }.flatMap { rows[$0.rows] }
    }

    /// The first page of the range in delivery order, from `raw`, a read of
    /// it in (transaction id, event id) order from its start (a sweep takes
    /// its snapshot and this read in one statement): put in order when it
    /// holds the whole range. Else its leading transactions that are also
    /// the first in delivery order, the usual case when writers commit in
    /// the order they began, are kept as read, the last of them maybe in
    /// part, and the rest is read in order from there.
    public mutating func firstPage(
        from raw: Journal.Page, limit: Int, byteLimit: Int? = nil, on connection: LibpqConnection
    ) throws(LibpqError) -> Journal.Page {
        if raw.isLast { return Journal.Page(rows: Self.inDeliveryOrder(raw.rows), isLast: true) }
        let transactions = try listTransactions(on: connection)
        var kept = 0
        var complete = 0
        while kept < raw.rows.count, complete < transactions.count, raw.rows[kept].transactionID == transactions[complete].id {
            let transaction = transactions[complete]
            while kept < raw.rows.count, raw.rows[kept].transactionID == transaction.id { kept += 1 }
            // Cut short by the page's end: the next page goes on inside it.
            guard raw.rows[kept - 1].id >= transaction.lastEventID else { break }
            complete += 1
        }
        guard kept > 0 else { return try page(after: nil, limit: limit, byteLimit: byteLimit, on: connection) }
        return Journal.Page(rows: Array(raw.rows[..<kept]), isLast: complete == transactions.count)
    }
}
