import AsyncHTTPClient
import Foundation
import Herald
import Logging
import NIOCore

extension HeraldClient {
    /// A reconnecting `GET /events` stream. Pull-based: while nobody reads,
    /// nothing is buffered beyond the socket, and the daemon eventually drops
    /// the stream with an overflow, after which it reconnects.
    public struct EventStream: AsyncSequence, Sendable {
        public typealias Element = Message

        let client: HeraldClient
        let filter: EventFilter
        /// `group=transaction`: one message per committed transaction.
        let groupsTransactions: Bool

        public func makeAsyncIterator() -> Iterator {
            Iterator(client: client, filter: filter, groupsTransactions: groupsTransactions)
        }

        public struct Iterator: AsyncIteratorProtocol {
            let client: HeraldClient
            let filter: EventFilter
            let groupsTransactions: Bool
            private var body: HTTPClientResponse.Body.AsyncIterator?
            private var parser = ServerSentEventParser()
            private var pending: [Message] = []
            private var pendingIndex = 0
            private var failedAttempts = 0
            private var hasConnected = false
            /// Where to resume after a reconnect.
            private var lastEventID: String?

            init(client: HeraldClient, filter: EventFilter, groupsTransactions: Bool) {
                self.client = client
                self.filter = filter
                self.groupsTransactions = groupsTransactions
            }

            public mutating func next() async throws -> Message? {
                try await next(isolation: nil)
            }

            /// Runs on the caller's actor, so a main-actor consumer does not hop per message.
            public mutating func next(isolation actor: isolated (any Actor)?) async throws -> Message? {
                while true {
                    if pendingIndex < pending.count {
                        defer { pendingIndex += 1 }
                        return pending[pendingIndex]
                    }
                    pending.removeAll(keepingCapacity: true)
                    pendingIndex = 0
                    try Task.checkCancellation()
                    if body == nil {
                        try await connect()
                        continue
                    }
                    do {
                        guard let chunk = try await nextChunk() else {
                            client.logger.info("event stream ended; reconnecting")
                            body = nil
                            continue
                        }
                        for message in try parser.feed(chunk.readableBytesView) {
                            try handle(message)
                        }
                    } catch let error as HeraldClientError {
                        throw error
                    } catch {
                        if Task.isCancelled { throw CancellationError() }
                        client.logger.info("event stream broke; reconnecting", metadata: ["error": "\(error)"])
                        body = nil
                    }
                }
            }

            private mutating func nextChunk(isolation actor: isolated (any Actor)? = #isolation) async throws -> ByteBuffer? {
                try await body!.next(isolation: actor)
            }

            private mutating func handle(_ message: ServerSentEvent) throws {
                switch message.type {
                case "INSERT", "UPDATE", "DELETE", "TRUNCATE":
                    do {
                        let event = try Event(payload: message.data)
                        pending.append(.event(event))
                        resume(after: event.id)
                    } catch {
                        throw HeraldClientError(code: .protocolError, message: "the daemon sent an event that does not decode: \(error)")
                    }
                case "transaction":
                    do {
                        let group = try TransactionGroup(payload: message.data)
                        pending.append(.transaction(group))
                        resume(after: group.lastEventID)
                    } catch {
                        throw HeraldClientError(code: .protocolError, message: "the daemon sent a transaction that does not decode: \(error)")
                    }
                case "token_expired":
                    // The stream ends here; the next connection asks the provider for a fresh token.
                    client.logger.info("the token expired; reconnecting with a fresh one")
                    body = nil
                case "overflow":
                    client.logger.warning("fell behind the daemon and was dropped; reconnecting to resume")
                    body = nil
                case "interrupted":
                    client.logger.warning("the daemon's row-level security checks for this stream stopped; reconnecting to resume")
                    body = nil
                case "reset":
                    let reason = (try? JSONParser.parse(message.data))?.objectValue?["message"]?.stringValue ?? message.data
                    client.logger.warning("the daemon could not resume the stream", metadata: ["reason": "\(reason)"])
                    pending.append(.reset(reason: reason))
                default:
                    break
                }
            }

            /// Only journal ids (digits) are positions the daemon can resume from.
            private mutating func resume(after eventID: String) {
                if eventID.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
                    lastEventID = eventID
                }
            }

            private mutating func connect(isolation actor: isolated (any Actor)? = #isolation) async throws {
                if failedAttempts > 0 {
                    try await Task.sleep(for: client.configuration.backoff.delay(beforeAttempt: failedAttempts, random: .random(in: 0..<1)))
                }
                let query = (FilterQuery.queryItems(for: filter) + (groupsTransactions ? [("group", "transaction")] : []))
                    .map { "\(Self.encode($0.name))=\(Self.encode($0.value))" }
                    .joined(separator: "&")
                var request: HTTPClientRequest
                do {
                    request = try await client.request(path: query.isEmpty ? "/events" : "/events?\(query)")
                } catch let error as HeraldClientError where error.code == .unavailable {
                    failedAttempts += 1
                    pending.append(.unreachable(error))
                    return
                }
                request.headers.add(name: "Accept", value: "text/event-stream")
                if let lastEventID { request.headers.add(name: "Last-Event-ID", value: lastEventID) }
                if let problem = client.checkReachable() {
                    failedAttempts += 1
                    pending.append(.unreachable(problem))
                    return
                }
                let response: HTTPClientResponse
                do {
                    response = try await client.httpClient.execute(request, deadline: .distantFuture, logger: client.logger)
                } catch {
                    if Task.isCancelled { throw CancellationError() }
                    failedAttempts += 1
                    client.logger.debug("cannot connect to the daemon", metadata: ["attempt": "\(failedAttempts)", "error": "\(error)"])
                    pending.append(.unreachable(client.unreachable(error)))
                    return
                }
                switch response.status {
                case .ok:
                    body = response.body.makeAsyncIterator()
                    parser = ServerSentEventParser()
                    // After a drop, or after attempts that were reported as unreachable.
                    if hasConnected || failedAttempts > 0 { pending.append(.reconnected) }
                    failedAttempts = 0
                    hasConnected = true
                case .badRequest:
                    let text = (try? await response.body.collect(upTo: 64 << 10)).map { String(buffer: $0) } ?? ""
                    throw HeraldClientError(code: .rejected, message: "the daemon rejected the subscription: \(text.trimmingCharacters(in: .whitespacesAndNewlines))")
                case .forbidden:
                    let text = (try? await response.body.collect(upTo: 64 << 10)).map { String(buffer: $0) } ?? ""
                    throw HeraldClientError(code: .forbidden, message: "the daemon's access rules refuse this subscription: \(text.trimmingCharacters(in: .whitespacesAndNewlines))")
                case .unauthorized:
                    let text = (try? await response.body.collect(upTo: 64 << 10)).map { String(buffer: $0) } ?? ""
                    let error = HeraldClientError(code: .unauthorized, message: "pgherald at \(client.configuration.endpoint) refused the token: \(text.trimmingCharacters(in: .whitespacesAndNewlines).prefix(300))")
                    // A provider may have a fresh token by the next attempt; a fixed token never will.
                    guard client.configuration.tokenRefreshes else { throw error }
                    client.refusedToken.record(request)
                    failedAttempts += 1
                    pending.append(.unreachable(error))
                default:
                    failedAttempts += 1
                    let text = (try? await response.body.collect(upTo: 64 << 10)).map { String(buffer: $0) } ?? ""
                    client.logger.info("the daemon refused the stream for now", metadata: ["status": "\(response.status.code)"])
                    pending.append(.unreachable(HeraldClientError(
                        code: .unavailable,
                        message: "pgherald at \(client.configuration.endpoint) refused the stream for now (\(response.status.code)): \(text.trimmingCharacters(in: .whitespacesAndNewlines).prefix(200))"
                    )))
                }
            }

            private static func encode(_ text: String) -> String {
                text.addingPercentEncoding(withAllowedCharacters: .urlQueryValueAllowed) ?? text
            }
        }
    }
}

extension CharacterSet {
    /// Characters that may stand unescaped in a query name or value.
    static let urlQueryValueAllowed = CharacterSet.urlQueryAllowed.subtracting(CharacterSet(charactersIn: "&=+;#"))
}
