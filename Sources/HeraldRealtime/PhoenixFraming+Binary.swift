import Herald

extension PhoenixFraming {
    /// Reads a binary frame: in vsn 2.0.0, realtime-js and supabase-swift send
    /// every broadcast as a "user broadcast push" (kind 3):
    ///
    /// `[kind][join_ref length][ref length][topic length][event length][metadata length][encoding]`
    /// `[join_ref][ref][topic][event][metadata][payload]`, each length one byte,
    /// the payload JSON (encoding 1) or raw bytes (encoding 0).
    ///
    /// It becomes the `broadcast` message a text frame would carry,
    /// `{type: broadcast, event, payload}`, with `meta` when there is metadata.
    /// Raw payloads are refused: the topic's members may use either framing,
    /// and vsn 1.0.0 has no way to carry them.
    public func decodeBinary(_ bytes: [UInt8]) throws(PhoenixFrameError) -> PhoenixMessage {
        guard self == .v2 else { throw PhoenixFrameError("binary frames are vsn 2.0.0 broadcasts; this socket speaks 1.0.0") }
        guard bytes.count >= 7, bytes[0] == Self.userBroadcastPush else {
            throw PhoenixFrameError("a binary frame must be a user broadcast push (kind 3)")
        }
        let lengths = bytes[1...5].map(Int.init)
        guard bytes.count >= 7 + lengths.reduce(0, +) else { throw PhoenixFrameError("a binary frame is shorter than its header says") }
        var offset = 7
        func field(_ length: Int) -> ArraySlice<UInt8> {
            defer { offset += length }
            return bytes[offset..<(offset + length)]
        }
        let (joinRef, ref, topic, event, metadata) = (field(lengths[0]), field(lengths[1]), field(lengths[2]), field(lengths[3]), field(lengths[4]))
        guard bytes[6] == Self.jsonEncoding else {
            throw PhoenixFrameError("pgherald takes JSON broadcast payloads; a raw binary payload (encoding \(bytes[6])) cannot reach vsn 1.0.0 members")
        }
        func text(_ slice: ArraySlice<UInt8>) -> String { String(decoding: slice, as: UTF8.self) }
        var message: JSONObject = ["type": .string("broadcast"), "event": .string(text(event))]
        do {
            message["payload"] = try JSONParser.parse(Array(bytes[offset...]))
            if !metadata.isEmpty { message["meta"] = try JSONParser.parse(Array(metadata)) }
        } catch {
            throw PhoenixFrameError("a binary broadcast's payload or metadata is not JSON: \(error)")
        }
        return PhoenixMessage(
            joinRef: joinRef.isEmpty ? .null : .string(text(joinRef)), ref: ref.isEmpty ? .null : .string(text(ref)),
            topic: text(topic), event: "broadcast", payload: .object(message)
        )
    }

    static let userBroadcastPush: UInt8 = 3
    static let jsonEncoding: UInt8 = 1
}
