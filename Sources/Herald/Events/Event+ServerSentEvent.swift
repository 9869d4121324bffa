extension Event {
    /// The event as one Server-Sent Events frame: `id:` the event id,
    /// `event:` the op, `data:` the JSON on one line, then a blank line.
    /// The socket writes the same lines straight into its batch buffer.
    public var serverSentEventFrame: [UInt8] {
        let json = jsonBytes
        var frame: [UInt8] = []
        frame.reserveCapacity(json.count + id.utf8.count + 32)
        frame += "id: ".utf8
        frame += id.utf8
        frame += "\nevent: ".utf8
        frame += operation.rawValue.utf8
        frame += "\ndata: ".utf8
        frame += json
        frame += "\n\n".utf8
        return frame
    }
}
