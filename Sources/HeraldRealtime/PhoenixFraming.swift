import Herald

/// How messages travel in WebSocket text frames, chosen by the `vsn` query parameter.
public enum PhoenixFraming: String, Sendable, CaseIterable {
    /// `{"topic","event","payload","ref","join_ref"}`; the default, and realtime-py's.
    case v1 = "1.0.0"
    /// `[join_ref, ref, topic, event, payload]`; realtime-js and supabase-swift's.
    case v2 = "2.0.0"

    /// The framing `vsn` asks for; v1 when it is absent, nil when it is unknown.
    public init?(vsn: String?) {
        guard let vsn else {
            self = .v1
            return
        }
        self.init(rawValue: vsn)
    }

    /// Reads one frame's text.
    public func decode(_ bytes: [UInt8]) throws(PhoenixFrameError) -> PhoenixMessage {
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes)
        } catch {
            throw PhoenixFrameError("not JSON: \(error)")
        }
        let joinRef: JSONValue, ref: JSONValue, topic: JSONValue?, event: JSONValue?, payload: JSONValue?
        switch (self, value) {
        case (.v1, .object(let object)):
            (joinRef, ref, topic, event, payload) = (object["join_ref"] ?? .null, object["ref"] ?? .null, object["topic"], object["event"], object["payload"])
        case (.v2, .array(let items)) where items.count == 5:
            (joinRef, ref, topic, event, payload) = (items[0], items[1], items[2], items[3], items[4])
        case (.v1, _):
            throw PhoenixFrameError("vsn 1.0.0 frames are JSON objects with topic, event, payload and ref")
        case (.v2, _):
            throw PhoenixFrameError("vsn 2.0.0 frames are arrays [join_ref, ref, topic, event, payload]")
        }
        guard let topic = topic?.stringValue, let event = event?.stringValue else {
            throw PhoenixFrameError("topic and event must be strings")
        }
        for reference in [joinRef, ref] {
            switch reference {
            case .null, .string, .number: continue
            default: throw PhoenixFrameError("join_ref and ref must be strings, numbers or null")
            }
        }
        return PhoenixMessage(joinRef: joinRef, ref: ref, topic: topic, event: event, payload: payload ?? .object([:]))
    }

    /// One frame's text. In v1 every key is written, `"ref":null` included:
    /// realtime-py drops a pushed event without it.
    public func encode(_ message: PhoenixMessage) -> [UInt8] {
        var writer = JSONWriter(reservingCapacity: 128)
        switch self {
        case .v1:
            writer.writeKey("topic", first: true)
            writer.write(string: message.topic)
            writer.writeKey("event")
            writer.write(string: message.event)
            writer.writeKey("payload")
            writer.write(message.payload)
            writer.writeKey("ref")
            writer.write(message.ref)
            writer.writeKey("join_ref")
            writer.write(message.joinRef)
            return [UInt8(ascii: "{")] + writer.bytes + [UInt8(ascii: "}")]
        case .v2:
            writer.writeRaw(UInt8(ascii: "["))
            writer.write(message.joinRef)
            writer.writeRaw(UInt8(ascii: ","))
            writer.write(message.ref)
            writer.writeRaw(UInt8(ascii: ","))
            writer.write(string: message.topic)
            writer.writeRaw(UInt8(ascii: ","))
            writer.write(string: message.event)
            writer.writeRaw(UInt8(ascii: ","))
            writer.write(message.payload)
            writer.writeRaw(UInt8(ascii: "]"))
            return writer.bytes
        }
    }

    /// A `postgres_changes` push around an already encoded payload, without
    /// parsing or re-encoding it: the fan-out path.
    public func encodeChange(topic: [UInt8], payload: some Collection<UInt8>) -> [UInt8] {
        var frame: [UInt8] = []
        frame.reserveCapacity(payload.count + topic.count + 64)
        switch self {
        case .v1:
            frame += Self.v1ChangeHead
            frame += topic
            frame += Self.v1ChangeMiddle
            frame += payload
            frame += Self.v1ChangeTail
        case .v2:
            frame += Self.v2ChangeHead
            frame += topic
            frame += Self.v2ChangeMiddle
            frame += payload
            frame.append(UInt8(ascii: "]"))
        }
        return frame
    }

    private static let v1ChangeHead = Array(#"{"topic":"#.utf8)
    private static let v1ChangeMiddle = Array(#","event":"postgres_changes","payload":"#.utf8)
    private static let v1ChangeTail = Array(#","ref":null,"join_ref":null}"#.utf8)
    private static let v2ChangeHead = Array("[null,null,".utf8)
    private static let v2ChangeMiddle = Array(#","postgres_changes","#.utf8)
}

/// A frame that is not a Phoenix message; the connection stays open.
public struct PhoenixFrameError: Error, Hashable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
