import Foundation
import Herald
import HeraldHTTP
import HeraldCluster
import HeraldPostgres
import HeraldRealtime
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

extension RealtimeEndpoint {
    /// Supabase's REST broadcast: `POST /realtime/v1/api/broadcast` with
    /// `{"messages": [{"topic", "event", "payload", "private"}]}`, and
    /// `POST /realtime/v1/api/broadcast/TOPIC/events/EVENT` (`?private=true`)
    /// whose body is the payload. Either answers 202 once the topic's members
    /// have the messages.
    func addBroadcastRoutes(to router: Router<SocketRequestContext>, transport: Transport) {
        router.post("realtime/v1/api/broadcast") { request, context in
            await self.broadcast(request, context: context, transport: transport) { body throws(BroadcastRefusal) in
                guard case .array(let items)? = body["messages"] else {
                    throw BroadcastRefusal(.badRequest, "invalid_messages", #"the body is {"messages": [{"topic", "event", "payload", "private"}]}"#)
                }
                return try items.map { item throws(BroadcastRefusal) in
                    guard let topic = item["topic"]?.stringValue, let event = item["event"]?.stringValue else {
                        throw BroadcastRefusal(.badRequest, "invalid_message", "every message has a topic and an event")
                    }
                    return (topic, event, item["payload"] ?? .object([:]), item["private"] == .bool(true))
                }
            }
        }
        router.post("realtime/v1/api/broadcast/:topic/events/:event") { request, context in
            let topic = context.parameters.get("topic") ?? ""
            let event = context.parameters.get("event") ?? ""
            let isPrivate = request.uri.queryParameters["private"] == "true"
            return await self.broadcast(request, context: context, transport: transport) { body throws(BroadcastRefusal) in
                [(topic, event, body, isPrivate)]
            }
        }
    }

    private func broadcast(
        _ request: Request, context: SocketRequestContext, transport: Transport,
        messages: (JSONValue) throws(BroadcastRefusal) -> [(topic: String, event: String, payload: JSONValue, isPrivate: Bool)]
    ) async -> Response {
        do throws(BroadcastRefusal) {
            let caller = try await broadcastCaller(request, context: context, transport: transport)
            let body: ByteBuffer
            do {
                body = try await request.body.collect(upTo: configuration.broadcastMaximumBytes + 4096)
            } catch {
                throw BroadcastRefusal(.contentTooLarge, "too_large", "a broadcast body is at most \(configuration.broadcastMaximumBytes) bytes of payload")
            }
            let parsed: JSONValue
            do {
                parsed = try JSONParser.parse(Array(body.readableBytesView))
            } catch {
                throw BroadcastRefusal(.badRequest, "invalid_json", "the body is not JSON: \(error)")
            }
            let sent = try messages(parsed)
            for message in sent {
                let name = message.topic.hasPrefix("realtime:") ? String(message.topic.dropFirst("realtime:".count)) : message.topic
                guard !name.isEmpty else { throw BroadcastRefusal(.badRequest, "invalid_topic", "a topic needs a name") }
                guard name.utf8.count <= RealtimeSession.maximumTopicBytes else {
                    throw BroadcastRefusal(.badRequest, "invalid_topic", "a topic's name is at most \(RealtimeSession.maximumTopicBytes) bytes")
                }
                if message.isPrivate, let refusal = await refusalToSend(privately: name, as: caller) {
                    throw BroadcastRefusal(.forbidden, "unauthorized", refusal)
                }
                // The event reaches every member with the payload, so it counts too.
                let bytes = message.payload.jsonText.utf8.count + message.event.utf8.count
                guard bytes <= configuration.broadcastMaximumBytes else {
                    throw BroadcastRefusal(.contentTooLarge, "too_large", "a broadcast of \(bytes) bytes is larger than realtime.broadcast.max_bytes (\(configuration.broadcastMaximumBytes))")
                }
                let refusal = restLimiters.withLock { limiters in
                    limiters[caller.name, default: BroadcastLimiter(
                        maximumBytes: configuration.broadcastMaximumBytes, maximumPerSecond: configuration.broadcastMaximumPerSecond
                    )].admit(bytes: bytes, now: .now)
                }
                if let refusal { throw BroadcastRefusal(.tooManyRequests, "rate_limited", refusal) }
            }
            let pushes = sent.map { message in
                let name = message.topic.hasPrefix("realtime:") ? String(message.topic.dropFirst("realtime:".count)) : message.topic
                let topic = "realtime:\(name)"
                return (PhoenixMessage.push(topic: topic, event: "broadcast", payload: .object([
                    "type": .string("broadcast"), "event": .string(message.event), "payload": message.payload,
                ])), BroadcastHub.Topic(name: topic, isPrivate: message.isPrivate))
            }
            for (push, topic) in pushes {
                if let refusal = broadcasts.clusterRefusal(broadcast: push, on: topic) {
                    throw BroadcastRefusal(.contentTooLarge, "too_large", refusal)
                }
            }
            for (push, topic) in pushes { broadcasts.publish(push, to: topic, from: nil) }
            return Response(status: .accepted)
        } catch {
            logger.info("refused a REST broadcast", metadata: ["status": "\(error.status.code)", "reason": "\(error.body.message)"])
            return Response.json(error.status, error.body)
        }
    }

    /// Why `caller` may not broadcast on the private topic `name`, or nil.
    /// For a row-level-security identity the policies on `realtime.messages`
    /// decide, as they do for a join, and a `topics:` grant cannot widen
    /// them; where the database has no such policies, the grant decides.
    private func refusalToSend(privately name: String, as caller: RealtimeCaller) async -> String? {
        if let identity = caller.scope.rowSecurity, let rowSecurity {
            do throws(RowSecurityError) {
                if let authorization = try await rowSecurity.authorize(topic: name, as: identity) {
                    return authorization.writesBroadcast ? nil : "You do not have permissions to write to this Channel topic: \(name)"
                }
            } catch {
                return "the private topic \(name)'s authorization could not be checked: \(error.reason)"
            }
        }
        return caller.scope.covers(topic: name) ? nil : "\(caller.name) is not granted the private topic '\(name)'"
    }

    /// The caller by its `apikey` header, `Authorization: Bearer` token or
    /// `x-api-key`; a Unix-socket peer without keys configured, by who it is.
    private func broadcastCaller(_ request: Request, context: SocketRequestContext, transport: Transport) async throws(BroadcastRefusal) -> RealtimeCaller {
        let credentials = self.credentials.withLock { $0 }
        if credentials.isEmpty {
            guard case .unixSocket(let peer) = transport else {
                throw BroadcastRefusal(.unauthorized, "no_keys", "realtime over TCP needs realtime.keys or realtime.jwt in the config file")
            }
            return await peer(context.channel)
        }
        let bearer = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
        let presented = [bearer, request.headers[Self.apiKeyHeaderField], request.headers[Self.apiKeyField]].compactMap { $0 }
        var refusal = RealtimeAuthError(.missing, "no apikey header or Authorization: Bearer token")
        for candidate in presented {
            do {
                return RealtimeCaller(try credentials.identify(candidate, now: Date().timeIntervalSince1970), presentedKey: candidate)
            } catch {
                refusal = error
            }
        }
        throw BroadcastRefusal(.unauthorized, refusal.code.rawValue, refusal.message)
    }

    static let apiKeyHeaderField = HTTPField.Name("apikey")!
}

/// Why a REST broadcast is refused, as the response says it.
struct BroadcastRefusal: Error {
    var status: HTTPResponse.Status
    var body: ErrorBody

    init(_ status: HTTPResponse.Status, _ code: String, _ message: String) {
        self.status = status
        body = ErrorBody(code: code, message: message)
    }
}
