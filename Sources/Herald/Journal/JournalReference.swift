/// A durable trigger's stand-in for an event too large to notify:
/// `{"ref":"<event id>","txid":"<transaction id>"}`. The full event is in the journal.
public struct JournalReference: Sendable, Hashable {
    public var id: UInt64
    public var transactionID: UInt64

    public init(id: UInt64, transactionID: UInt64) {
        self.id = id
        self.transactionID = transactionID
    }

    /// Reads a reference payload; `nil` for anything else.
    public init?(payload: UnsafeBufferPointer<UInt8>) {
        guard let members = try? JSONParser.readObject(payload), members.count == 2 else { return nil }
        var id: UInt64?
        var transactionID: UInt64?
        for (key, value) in members {
            guard case .string(let text) = value else { return nil }
            switch key {
            case "ref": id = UInt64(text)
            case "txid": transactionID = UInt64(text)
            default: return nil
            }
        }
        guard let id, let transactionID else { return nil }
        self.init(id: id, transactionID: transactionID)
    }
}
