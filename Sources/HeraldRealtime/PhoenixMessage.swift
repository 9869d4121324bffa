public import Herald

/// One message of the Phoenix channel protocol that Supabase Realtime speaks.
///
/// `joinRef` and `ref` are kept as the client sent them (a string, a number or
/// null) because replies must repeat them exactly.
public struct PhoenixMessage: Sendable, Hashable {
    public var joinRef: JSONValue
    public var ref: JSONValue
    public var topic: String
    public var event: String
    public var payload: JSONValue

    public init(joinRef: JSONValue = .null, ref: JSONValue = .null, topic: String, event: String, payload: JSONValue) {
        self.joinRef = joinRef
        self.ref = ref
        self.topic = topic
        self.event = event
        self.payload = payload
    }

    /// The reply to `request`: `phx_reply` with the request's refs.
    public static func reply(to request: PhoenixMessage, status: String, response: JSONValue) -> PhoenixMessage {
        PhoenixMessage(
            joinRef: request.joinRef, ref: request.ref, topic: request.topic, event: "phx_reply",
            payload: .object(["status": .string(status), "response": response])
        )
    }

    /// An error reply whose `reason` clients log.
    public static func errorReply(to request: PhoenixMessage, reason: String) -> PhoenixMessage {
        reply(to: request, status: "error", response: .object(["reason": .string(reason)]))
    }

    /// A message the server sends on its own: no ref, so clients do not take it for a reply.
    public static func push(topic: String, joinRef: JSONValue = .null, event: String, payload: JSONValue) -> PhoenixMessage {
        PhoenixMessage(joinRef: joinRef, ref: .null, topic: topic, event: event, payload: payload)
    }
}
