public import Foundation
public import Herald

/// `pgherald webhooks send-test`: one signed request outside the queue.
public enum WebhookTest {
    public struct Result: Sendable {
        public var outcome: DeliveryOutcome
        public var excerpt: String?
        public var elapsed: Duration
    }

    /// A test event in the shared shape, on the table `pgherald.test`, with an id of its own.
    public static func event(at date: Date = Date()) -> Event {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return Event(
            id: "test-\(Int64(date.timeIntervalSince1970 * 1000))", operation: .insert,
            table: TableName(schema: "pgherald", name: "test"),
            new: ["message": .string("pgherald webhooks send-test")],
            transactionID: "0", at: formatter.string(from: date)
        )
    }

    public static func send(to endpoint: WebhookEndpoint, version: String) async -> Result {
        let sender = WebhookSender(endpoint: endpoint, version: version)
        let event = event()
        let started = ContinuousClock.now
        let attempt = await sender.send(eventID: event.id, body: event.jsonBytes)
        await sender.shutdown()
        return Result(outcome: attempt.outcome, excerpt: attempt.excerpt, elapsed: ContinuousClock.now - started)
    }
}
