extension TransactionGroup {
    /// The group as compact JSON: `txid`, `count`, and `events`, each event in its usual shape.
    public var jsonBytes: [UInt8] {
        let encoded = events.map(\.jsonBytes)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(encoded.reduce(64) { $0 + $1.count + 1 })
        var writer = JSONWriter()
        writer.write(string: transactionID)
        bytes += #"{"txid":"#.utf8
        bytes += writer.bytes
        bytes += #","count":"#.utf8
        bytes += String(events.count).utf8
        bytes += #","events":["#.utf8
        for (index, event) in encoded.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes += event
        }
        bytes += "]}".utf8
        return bytes
    }

    /// The group as one Server-Sent Events frame: `id:` the last event's id
    /// (what `Last-Event-ID` resumes after), `event: transaction`, `data:` the JSON.
    public var serverSentEventFrame: [UInt8] {
        let json = jsonBytes
        var frame: [UInt8] = []
        frame.reserveCapacity(json.count + 48)
        frame += "id: ".utf8
        frame += lastEventID.utf8
        frame += "\nevent: transaction\ndata: ".utf8
        frame += json
        frame += "\n\n".utf8
        return frame
    }

    /// Decodes a group from its JSON, as a client receives it.
    public init(payload: String) throws(EventDecodingError) {
        let value: JSONValue
        do {
            value = try JSONParser.parse(payload)
        } catch {
            throw EventDecodingError(code: .invalidJSON, detail: error.description)
        }
        guard let members = value.objectValue else { throw EventDecodingError(code: .notAnObject, detail: "") }
        guard let transactionID = members["txid"]?.stringValue else {
            throw EventDecodingError(code: .missingField, detail: "txid")
        }
        guard let list = members["events"]?.arrayValue, !list.isEmpty else {
            throw EventDecodingError(code: .missingField, detail: "events")
        }
        var events: [Event] = []
        events.reserveCapacity(list.count)
        for item in list {
            var writer = JSONWriter()
            writer.write(item)
            let event = try Event(payload: String(decoding: writer.bytes, as: UTF8.self))
            guard event.transactionID == transactionID else {
                throw EventDecodingError(code: .inconsistentRows, detail: "event \(event.id) is from transaction \(event.transactionID), not \(transactionID)")
            }
            events.append(event)
        }
        self.init(transactionID: transactionID, events: events)
    }
}
