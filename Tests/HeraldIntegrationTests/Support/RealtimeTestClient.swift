import Foundation
import Herald
import HummingbirdWSClient
import Logging
import NIOCore
import Synchronization

/// A WebSocket client of the realtime endpoint that keeps every text message
/// it receives, parsed, for tests to wait on.
final class RealtimeTestClient: Sendable {
    let vsn: String
    /// What the connection's task shares with the test.
    private final class Shared: Sendable {
        let received = Mutex<[JSONValue]>([])
        let writer = Mutex<WebSocketOutboundWriter?>(nil)
        let ended = Mutex<String?>(nil)
    }

    private let shared = Shared()
    private let connection: Task<Void, any Error>

    init(port: Int, apikey: String?, vsn: String = "1.0.0") async throws {
        self.vsn = vsn
        let query = (apikey.map { "apikey=\($0)&" } ?? "") + "vsn=\(vsn)"
        let url = "ws://127.0.0.1:\(port)/realtime/v1/websocket?\(query)"
        let shared = self.shared
        connection = Task {
            do {
                try await WebSocketClient.connect(url: url, configuration: .init(maxFrameSize: 1 << 22), logger: Logger(label: "realtime-test")) { inbound, outbound, _ in
                    shared.writer.withLock { $0 = outbound }
                    for try await message in inbound.messages(maxSize: 1 << 24) {
                        guard case .text(let text) = message, let value = try? JSONParser.parse(text) else { continue }
                        shared.received.withLock { $0.append(value) }
                    }
                }
                shared.ended.withLock { $0 = "closed" }
            } catch {
                shared.ended.withLock { $0 = "\(error)" }
                throw error
            }
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while shared.writer.withLock({ $0 }) == nil {
            // A refused upgrade ends the connection at once.
            if let reason = shared.ended.withLock({ $0 }) { throw RealtimeConnectFailed(reason: reason) }
            if ContinuousClock.now > deadline { throw ProcessTimeout(description: "the WebSocket did not open") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Why the connection ended, once it has.
    var endedBecause: String? { shared.ended.withLock { $0 } }

    /// Sends a message built from `[join_ref, ref, topic, event, payload]`, framed for this client's `vsn`.
    func send(joinRef: String? = nil, ref: String? = nil, topic: String, event: String, payload: String = "{}") async throws {
        func quoted(_ text: String?) -> String { text.map { JSONValue.string($0).jsonText } ?? "null" }
        let text = vsn == "2.0.0"
            ? "[\(quoted(joinRef)),\(quoted(ref)),\(quoted(topic)),\(quoted(event)),\(payload)]"
            : #"{"topic":\#(quoted(topic)),"event":\#(quoted(event)),"payload":\#(payload),"ref":\#(quoted(ref)),"join_ref":\#(quoted(joinRef))}"#
        try await sendRaw(text)
    }

    func sendRaw(_ text: String) async throws {
        try await shared.writer.withLock { $0 }!.write(.text(text))
    }

    func sendBinary(_ bytes: [UInt8]) async throws {
        try await shared.writer.withLock { $0 }!.write(.binary(ByteBuffer(bytes: bytes)))
    }

    /// A received message as `(topic, event, payload, ref)`, whichever framing it came in.
    struct Message {
        var topic: String
        var event: String
        var payload: JSONValue
        var ref: JSONValue
        var joinRef: JSONValue
    }

    private func message(_ value: JSONValue) -> Message? {
        switch value {
        case .array(let items) where items.count == 5:
            return Message(topic: items[2].stringValue ?? "", event: items[3].stringValue ?? "", payload: items[4], ref: items[1], joinRef: items[0])
        case .object(let object):
            return Message(
                topic: object["topic"]?.stringValue ?? "", event: object["event"]?.stringValue ?? "",
                payload: object["payload"] ?? .null, ref: object["ref"] ?? .missing, joinRef: object["join_ref"] ?? .missing
            )
        default:
            return nil
        }
    }

    /// Waits for the first message that `predicate` accepts and removes it from the inbox.
    @discardableResult
    func next(within seconds: Double = 10, _ what: String = "message", where predicate: (Message) -> Bool) async throws -> Message {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            let found = shared.received.withLock { inbox -> Message? in
                guard let index = inbox.firstIndex(where: { message($0).map(predicate) ?? false }) else { return nil }
                return message(inbox.remove(at: index))
            }
            if let found { return found }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ProcessTimeout(description: "no \(what) within \(seconds) s; received: \(shared.received.withLock { $0.map(\.jsonText) })")
    }

    /// The change events received so far for `topic`, in order, removed from the inbox.
    func takeChanges(_ count: Int, topic: String, within seconds: Double = 10) async throws -> [JSONValue] {
        var changes: [JSONValue] = []
        for _ in 0..<count {
            changes.append(try await next(within: seconds, "postgres_changes \(changes.count + 1) of \(count)") {
                $0.topic == topic && $0.event == "postgres_changes"
            }.payload)
        }
        return changes
    }

    /// Messages not yet taken, left in the inbox.
    var unreadMessages: [Message] { shared.received.withLock { $0.compactMap(message) } }

    /// Messages not yet taken, as JSON text.
    var unread: [String] { shared.received.withLock { $0.map(\.jsonText) } }

    func close() async {
        if let writer = shared.writer.withLock({ $0 }) { try? await writer.close(.normalClosure, reason: nil) }
        connection.cancel()
        _ = try? await connection.value
    }
}

struct RealtimeConnectFailed: Error {
    var reason: String
}

extension JSONValue {
    /// Marks a key that a v1 frame left out, unlike one that was null.
    static let missing = JSONValue.string("\u{0}missing")
}
