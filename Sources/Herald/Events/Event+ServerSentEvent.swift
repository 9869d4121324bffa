extension Event {
    /// The event as one Server-Sent Events frame: `id:` the event id,
    /// `event:` the op, `data:` the JSON on one line, then a blank line.
    ///
    /// Encoded once when the broker stamps the event, because the socket
    /// sends these same bytes to every subscriber of the event.
    public var serverSentEventFrame: [UInt8] {
        storage.encodedFrame ?? serverSentEventFrame(json: jsonBytes)
    }

    func serverSentEventFrame(json: [UInt8]) -> [UInt8] {
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
