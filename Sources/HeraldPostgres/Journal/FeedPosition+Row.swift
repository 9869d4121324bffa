public import Herald

extension FeedPosition: RowDecodable {
    /// From the columns `snapshot`, `target`, `after_txid` and `after_id`,
    /// which `pgherald.webhook_feed` and `pgherald.output_cursor` share.
    public init(row: ResultRow) throws(LibpqError) {
        let transactionID = try row.optional("after_txid", as: UInt64.self)
        let id = try row.optional("after_id", as: UInt64.self)
        self.init(
            snapshot: try row.value("snapshot"), target: try row.optional("target"),
            after: transactionID.flatMap { transactionID in id.map { Row(transactionID: transactionID, id: $0) } }
        )
    }
}
