/// A durable trigger's stand-in for events it did not notify: one too large
/// to notify, `{"ref":"<event id>","txid":"<transaction id>"}`, or a
/// statement's too many, `{"ref":"<first id>","through":"<last id>","txid":"…"}`.
/// The events are in the journal.
public struct JournalReference: Sendable, Hashable {
    /// The first event's id.
    public var id: UInt64
    /// The last event's id; `id` for a single event.
    public var lastID: UInt64
    public var transactionID: UInt64

    public init(id: UInt64, lastID: UInt64? = nil, transactionID: UInt64) {
        self.id = id
        self.lastID = lastID ?? id
        self.transactionID = transactionID
    }

    /// Reads a reference payload; `nil` for anything else.
    public init?(payload: UnsafeBufferPointer<UInt8>) {
        var id: UInt64?
        var lastID: UInt64?
        var transactionID: UInt64?
        var members = 0
        var recognized = true
        let isObject = try? JSONParser.readMembers(payload) { name, parser throws(JSONParsingError) in
            members += 1
            guard case .string(let text) = try parser.readShallowValue() else {
                recognized = false
                return
            }
            switch String(decoding: name, as: UTF8.self) {
            case "ref": id = UInt64(text)
            case "through": lastID = UInt64(text)
            case "txid": transactionID = UInt64(text)
            default: recognized = false
            }
        }
        guard isObject == true, recognized, members == 2 || members == 3 else { return nil }
        guard let id, let transactionID, members == (lastID == nil ? 2 : 3), (lastID ?? id) >= id else { return nil }
        self.init(id: id, lastID: lastID, transactionID: transactionID)
    }
}
