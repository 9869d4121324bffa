import Foundation
import Synchronization

extension JetStream {
    /// Where a stream's messages start and end now.
    public struct StreamState: Sendable, Equatable, Decodable {
        public var messages: UInt64
        public var firstSequence: UInt64
        public var lastSequence: UInt64

        enum CodingKeys: String, CodingKey {
            case messages, firstSequence = "first_seq", lastSequence = "last_seq"
        }
    }

    private struct StreamStateInfo: Decodable {
        var state: StreamState
    }

    /// The stream's state; throws ``NATSError/Code/noStream`` when there is no such stream.
    public func state(ofStream name: String) async throws -> StreamState {
        let answer = try await api("STREAM.INFO.\(name)", payload: [])
        if let failure = try? JSONDecoder().decode(APIError.self, from: Data(answer)).error {
            if failure.code == 404 { throw NATSError(.noStream, "JetStream has no stream \(name)") }
            throw NATSError(.jetStream, "cannot read stream \(name): \(failure.description ?? "error \(failure.code)")")
        }
        do {
            return try JSONDecoder().decode(StreamStateInfo.self, from: Data(answer)).state
        } catch {
            throw NATSError(.protocolViolation, "stream \(name)'s state is not what was expected: \(String(decoding: answer.prefix(200), as: UTF8.self))")
        }
    }

    /// One message of a stream, with where it is.
    public struct StoredMessage: Sendable {
        public var streamSequence: UInt64
        /// Messages the stream holds after this one, as the server counted when it sent it.
        public var pending: UInt64
        public var message: NATSMessage
    }

    /// Every message of `stream` from `sequence` on, in stream order, with no
    /// gap and no repeat, until the connection ends or the reader stops: each
    /// element is what one read of the connection brought.
    ///
    /// An ordered push consumer, as NATS clients make one: ephemeral, without
    /// acknowledgements, with flow control and idle heartbeats. When a
    /// consumer sequence is skipped or heartbeats stop, the consumer is
    /// replaced by one that starts after the last message delivered.
    /// - Parameter idleHeartbeat: the server says it is alive this often
    ///   while there is nothing to send; three missed end the reading with an error.
    public func messages(
        of stream: String, from sequence: UInt64, idleHeartbeat: Duration = .seconds(2)
    ) -> AsyncThrowingStream<[StoredMessage], any Error> {
        let (messages, continuation) = AsyncThrowingStream<[StoredMessage], any Error>.makeStream(bufferingPolicy: .bufferingOldest(4096))
        let reading = Task {
            do {
                try await read(stream, from: sequence, idleHeartbeat: idleHeartbeat, into: continuation)
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in reading.cancel() }
        return messages
    }

    private func read(
        _ stream: String, from start: UInt64, idleHeartbeat: Duration, into output: AsyncThrowingStream<[StoredMessage], any Error>.Continuation
    ) async throws {
        let progress = ReaderProgress(next: start)
        while !Task.isCancelled {
            let deliverSubject = "_INBOX.\(UInt64.random(in: 0...UInt64.max)).ordered"
            let delivered = try await connection.subscribe(to: deliverSubject, backlog: 65_536)
            let consumer = try await createOrderedConsumer(stream, deliverTo: deliverSubject, from: progress.next.withLock { $0 }, idleHeartbeat: idleHeartbeat)
            progress.lastHeard.withLock { $0 = .now }
            let outcome = try await withThrowingTaskGroup(of: ConsumerOutcome.self) { group in
                group.addTask {
                    var expected: UInt64 = 1
                    var stored: [StoredMessage] = []
                    for await messages in delivered {
                        progress.lastHeard.withLock { $0 = .now }
                        // What came before a gap or a broken message is handed on whatever follows it.
                        defer {
                            if !stored.isEmpty { output.yield(stored) }
                            stored = []
                        }
                        stored.reserveCapacity(messages.count)
                        for message in messages {
                            if message.status == 100 {
                                // Flow control asks for an answer on its reply subject; a stalled consumer names one in a header.
                                let answerTo = message.replyTo ?? message.headers.first { $0.name == "Nats-Consumer-Stalled" }?.value
                                if let answerTo { try await connection.publish(subject: answerTo, payload: []) }
                                // A heartbeat names the last consumer sequence sent: one this reader never had was lost.
                                if let last = message.headers.first(where: { $0.name == "Nats-Last-Consumer" }).flatMap({ UInt64($0.value) }),
                                   last.addingReportingOverflow(1) != (expected, false) {
                                    return .gap
                                }
                                continue
                            }
                            guard let reply = message.replyTo, let position = AcknowledgementSubject(reply) else {
                                throw NATSError(.protocolViolation, "a message of stream \(stream) came without its position")
                            }
                            guard position.consumerSequence == expected else { return .gap }
                            expected += 1
                            progress.next.withLock { $0 = position.streamSequence + 1 }
                            stored.append(StoredMessage(streamSequence: position.streamSequence, pending: position.pending, message: message))
                        }
                    }
                    return .connectionEnded
                }
                group.addTask {
                    while true {
                        try await Task.sleep(for: idleHeartbeat)
                        if ContinuousClock.now - progress.lastHeard.withLock({ $0 }) > idleHeartbeat * 3 { return .silent }
                    }
                }
                defer { group.cancelAll() }
                return try await group.next() ?? .connectionEnded
            }
            switch outcome {
            case .gap:
                try? await deleteConsumer(stream, consumer)
            case .silent:
                try? await deleteConsumer(stream, consumer)
                throw NATSError(.timedOut, "stream \(stream) sent nothing, not even a heartbeat, for \(idleHeartbeat * 3)")
            case .connectionEnded:
                if Task.isCancelled { return }
                throw connection.closedReason ?? NATSError(.unreachable, "the connection to NATS ended")
            }
        }
    }

    /// What the reading and the watchdog share.
    private final class ReaderProgress: Sendable {
        /// The stream sequence to start from when the consumer is replaced.
        let next: Mutex<UInt64>
        let lastHeard = Mutex(ContinuousClock.now)

        init(next: UInt64) {
            self.next = Mutex(next)
        }
    }

    private enum ConsumerOutcome: Sendable {
        /// A message was lost between server and reader: start again after the last one delivered.
        case gap
        /// Neither messages nor heartbeats for three heartbeat intervals.
        case silent
        case connectionEnded
    }

    private struct ConsumerCreated: Decodable {
        var name: String
    }

    private func createOrderedConsumer(_ stream: String, deliverTo subject: String, from sequence: UInt64, idleHeartbeat: Duration) async throws -> String {
        let nanoseconds = Int64(idleHeartbeat / .nanoseconds(1))
        let request: [String: Any] = [
            "stream_name": stream,
            "config": [
                "deliver_subject": subject, "deliver_policy": "by_start_sequence", "opt_start_seq": sequence,
                "ack_policy": "none", "replay_policy": "instant", "flow_control": true, "idle_heartbeat": nanoseconds,
                "mem_storage": true, "num_replicas": 1, "inactive_threshold": nanoseconds * 5,
            ] as [String: Any],
        ]
        let answer = try await api("CONSUMER.CREATE.\(stream)", payload: Array(try JSONSerialization.data(withJSONObject: request)))
        if let failure = try? JSONDecoder().decode(APIError.self, from: Data(answer)).error {
            if failure.code == 404 { throw NATSError(.noStream, "JetStream has no stream \(stream)") }
            throw NATSError(.jetStream, "cannot read stream \(stream): \(failure.description ?? "error \(failure.code)")")
        }
        guard let created = try? JSONDecoder().decode(ConsumerCreated.self, from: Data(answer)) else {
            throw NATSError(.protocolViolation, "JetStream's answer to a new consumer is not what was expected: \(String(decoding: answer.prefix(200), as: UTF8.self))")
        }
        return created.name
    }

    private func deleteConsumer(_ stream: String, _ consumer: String) async throws {
        _ = try await api("CONSUMER.DELETE.\(stream).\(consumer)", payload: [])
    }
}

/// Where a stream message is, from its `$JS.ACK` reply subject:
/// `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>`,
/// or the newer form with a domain and an account hash before the stream and a token after.
struct AcknowledgementSubject: Equatable {
    var streamSequence: UInt64
    var consumerSequence: UInt64
    var pending: UInt64

    init?(_ subject: String) {
        var subject = subject
        guard let found = subject.withUTF8(Self.position) else { return nil }
        (streamSequence, consumerSequence, pending) = found
    }

    /// Read in place, token by token: every message an edge takes in has such a subject,
    /// and splitting it into strings cost as much as the rest of its intake.
    private static func position(in subject: UnsafeBufferPointer<UInt8>) -> (stream: UInt64, consumer: UInt64, pending: UInt64)? {
        let dot = UInt8(ascii: ".")
        let tokens = subject.reduce(1) { $0 + ($1 == dot ? 1 : 0) }
        guard tokens >= 9 else { return nil }
        // The numbers follow stream and consumer: at 4 in the old form, at 6 in the new (12 tokens or more).
        let first = tokens >= 12 ? 6 : 4
        guard tokens > first + 4 else { return nil }
        var stream: UInt64?, consumer: UInt64?, pending: UInt64?
        var index = 0
        var start = 0
        for end in 0...subject.count where end == subject.count || subject[end] == dot {
            let token = UnsafeBufferPointer(rebasing: subject[start..<end])
            switch index {
            case 0: guard token.elementsEqual("$JS".utf8) else { return nil }
            case 1: guard token.elementsEqual("ACK".utf8) else { return nil }
            case first + 1: stream = number(token)
            case first + 2: consumer = number(token)
            case first + 4: pending = number(token)
            default: break
            }
            index += 1
            start = end + 1
        }
        // Sequences start at 1, and the reader counts on from them: a subject that says otherwise is no position.
        guard let stream, let consumer, let pending, (1..<UInt64.max).contains(stream), (1..<UInt64.max).contains(consumer), pending < UInt64.max
        else { return nil }
        return (stream, consumer, pending)
    }

    /// Decimal digits only, and no more than a UInt64 holds.
    private static func number(_ digits: UnsafeBufferPointer<UInt8>) -> UInt64? {
        guard !digits.isEmpty else { return nil }
        var value: UInt64 = 0
        for digit in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(digit) else { return nil }
            let (times, overflowed) = value.multipliedReportingOverflow(by: 10)
            let (sum, carried) = times.addingReportingOverflow(UInt64(digit - UInt8(ascii: "0")))
            guard !overflowed, !carried else { return nil }
            value = sum
        }
        return value
    }
}
