import AsyncHTTPClient
import Foundation
public import Herald
import NIOCore

extension HeraldClient {
    /// A live query's rows, current after every change the daemon reports:
    /// `GET /queries/NAME?PARAM=VALUE`, resumed with `Last-Event-ID` after a
    /// drop or a daemon restart. A reader that is slow skips to the newest rows.
    ///
    /// Ends with ``HeraldClientError/Code/rejected`` for an unknown query,
    /// bad parameters or a query that fails, and with
    /// ``HeraldClientError/Code/forbidden`` when the access rules refuse it.
    public func liveQuery(_ name: String, parameters: [String: String] = [:]) -> AsyncThrowingStream<LiveQueryRows, any Error> {
        AsyncThrowingStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            let task = Task {
                var rows = LiveQueryRows()
                var failedAttempts = 0
                while !Task.isCancelled {
                    do {
                        if failedAttempts > 0 {
                            try await Task.sleep(for: configuration.backoff.delay(beforeAttempt: failedAttempts, random: .random(in: 0..<1)))
                        }
                        failedAttempts += 1
                        try await follow(name, parameters: parameters, rows: &rows) { current in
                            failedAttempts = 0
                            continuation.yield(current)
                        }
                    } catch let error as HeraldClientError where error.code != .unavailable {
                        continuation.finish(throwing: error)
                        return
                    } catch {
                        if Task.isCancelled { break }
                        logger.info("live query stream broke; reconnecting", metadata: ["query": "\(name)", "error": "\(error)"])
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// The same, each time as the app's own type.
    public func liveQuery<Row: Decodable & Sendable>(
        _ name: String, parameters: [String: String] = [:], as type: Row.Type, decoder: RowDecoder = RowDecoder()
    ) -> some AsyncSequence<[Row], any Error> {
        liveQuery(name, parameters: parameters).map { try $0.decode(type, decoder: decoder) }
    }

    /// One connection: applies each frame to `rows` and hands them on, until the stream ends.
    private func follow(
        _ name: String, parameters: [String: String], rows: inout LiveQueryRows, onChange: (LiveQueryRows) -> Void
    ) async throws {
        let allowed = CharacterSet.urlQueryValueAllowed
        let query = parameters.sorted { $0.key < $1.key }
            .map { "\($0.key.addingPercentEncoding(withAllowedCharacters: allowed) ?? $0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: allowed) ?? $0.value)" }
            .joined(separator: "&")
        let path = "/queries/\(name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? name)" + (query.isEmpty ? "" : "?\(query)")
        var request = try await request(path: path)
        request.headers.add(name: "Accept", value: "text/event-stream")
        if let token = rows.token { request.headers.add(name: "Last-Event-ID", value: token) }
        if let problem = checkReachable() { throw problem }
        let response = try await httpClient.execute(request, deadline: .distantFuture, logger: logger)
        guard response.status == .ok else {
            let text = (try? await response.body.collect(upTo: 64 << 10)).map { String(buffer: $0) } ?? ""
            let message = "GET \(path) answered \(response.status.code): \(text.trimmingCharacters(in: .whitespacesAndNewlines).prefix(300))"
            switch response.status {
            case .forbidden: throw HeraldClientError(code: .forbidden, message: message)
            case .unauthorized:
                guard configuration.tokenRefreshes else { throw HeraldClientError(code: .unauthorized, message: message) }
                // Tried again with the provider's next token; the same token again ends the stream.
                refusedToken.record(request)
                throw HeraldClientError(code: .unavailable, message: message)
            case .serviceUnavailable: throw HeraldClientError(code: .unavailable, message: message)
            default: throw HeraldClientError(code: .rejected, message: message)
            }
        }
        var parser = ServerSentEventParser()
        for try await chunk in response.body {
            for message in try parser.feed(chunk.readableBytesView) {
                switch message.type {
                case "result", "diff":
                    try rows.apply(frame: message.data)
                    onChange(rows)
                case "error":
                    throw HeraldClientError(code: .rejected, message: "live query \(name) failed: \(message.data)")
                case "token_expired":
                    // Reconnects with a fresh token and the last result's token, as after any drop.
                    throw HeraldClientError(code: .unavailable, message: "live query \(name): \(message.data)")
                case "revoked":
                    throw HeraldClientError(code: .forbidden, message: "live query \(name) is no longer granted: \(message.data)")
                default:
                    break
                }
            }
        }
    }
}
