import DequeModule
import Synchronization

/// A bounded single-consumer queue between the broker and one subscriber.
///
/// `offer` never blocks: the broker's publishing thread must not wait on any
/// subscriber. When the buffer is full, in events or in bytes, the mailbox
/// closes with an overflow; the consumer still receives what was buffered,
/// then the overflow error. Bytes are bounded too because a count alone lets
/// a subscriber that does not read hold thousands of large rows.
final class Mailbox: Sendable {
    enum OfferResult {
        case accepted
        /// The buffer was full; the mailbox is now closed and the subscriber must be dropped.
        case overflowed
        case closed
    }

    private enum Termination {
        case finished
        case overflowed
    }

    private struct State {
        /// The batches offered, kept as the broker's arrays: a batch taken
        /// whole is handed on without a copy, and most batches are.
        var buffer: Deque<[Event]> = []
        /// Events of the first batch already taken.
        var taken = 0
        /// Events buffered, over all batches.
        var count = 0
        /// The events' ``Event/retainedBytes``, over all batches, and per batch (less what was taken of the first).
        var bytes = 0
        var batchBytes: Deque<Int> = []
        var waiter: Waiter?
        var termination: Termination?
        var heartbeatDue = false

        mutating func append(_ events: [Event], bytes: Int) {
            guard !events.isEmpty else { return }
            buffer.append(events)
            batchBytes.append(bytes)
            count += events.count
            self.bytes += bytes
        }

        /// Up to `limit` events and, past the first, `byteLimit` bytes of them, in order.
        mutating func take(upTo limit: Int, bytes byteLimit: Int) -> [Event] {
            if taken == 0, buffer[0].count <= limit, batchBytes[0] <= byteLimit || buffer[0].count == 1,
                buffer.count == 1 || buffer[0].count + buffer[1].count > limit || batchBytes[0] + batchBytes[1] > byteLimit {
                count -= buffer[0].count
                bytes -= batchBytes.removeFirst()
                return buffer.removeFirst()
            }
            var events: [Event] = []
            events.reserveCapacity(min(limit, count))
            var takenBytes = 0
            while events.count < limit, let first = buffer.first {
                let size = first[taken].retainedBytes
                if !events.isEmpty, takenBytes + size > byteLimit { break }
                events.append(first[taken])
                takenBytes += size
                batchBytes[0] -= size
                taken += 1
                if taken == first.count {
                    buffer.removeFirst()
                    batchBytes.removeFirst()
                    taken = 0
                }
            }
            count -= events.count
            bytes -= takenBytes
            return events
        }
    }

    /// Who waits for the next events: a task, or an event-loop consumer's wake-up.
    enum Waiter {
        case task(CheckedContinuation<Void, Never>)
        case callback(@Sendable () -> Void)

        func wake() {
            switch self {
            case .task(let continuation): continuation.resume()
            case .callback(let wake): wake()
            }
        }
    }

    /// What a wait for events ended with.
    enum Take {
        case events([Event])
        /// A heartbeat was requested while nothing was buffered.
        case heartbeat
        case finished
    }

    let capacity: Int
    /// The most bytes of events it holds (``Event/retainedBytes``); one event always fits an empty mailbox.
    let byteCapacity: Int
    /// Whether ``requestHeartbeat()`` wakes this mailbox's consumer.
    let wantsHeartbeats: Bool
    private let state = Mutex(State())

    init(capacity: Int, byteCapacity: Int = .max, wantsHeartbeats: Bool = false) {
        precondition(capacity > 0, "a mailbox needs room for at least one event")
        self.capacity = capacity
        self.byteCapacity = byteCapacity
        self.wantsHeartbeats = wantsHeartbeats
    }

    /// Wakes an idle consumer with ``Take/heartbeat``; a busy one is left alone.
    func requestHeartbeat() {
        let waiter = state.withLock { state -> Waiter? in
            guard state.count == 0, state.termination == nil else { return nil }
            state.heartbeatDue = true
            let waiter = state.waiter
            state.waiter = nil
            return waiter
        }
        waiter?.wake()
    }

    /// Appends events in order; `bytes` is their ``Event/retainedBytes``,
    /// which the broker adds up once for every mailbox. If they do not all
    /// fit, those that fit are kept and the mailbox closes with an overflow.
    func offer(_ events: [Event], bytes: Int) -> OfferResult {
        let (result, waiter) = state.withLock { state -> (OfferResult, Waiter?) in
            guard state.termination == nil else { return (.closed, nil) }
            let room = capacity - state.count
            if events.count > room || (state.bytes + bytes > byteCapacity && (state.count > 0 || events.count > 1)) {
                var (fitting, fittingBytes) = (0, 0)
                for event in events.prefix(room) {
                    let size = event.retainedBytes
                    guard state.count + fitting == 0 || state.bytes + fittingBytes + size <= byteCapacity else { break }
                    fitting += 1
                    fittingBytes += size
                }
                state.append(Array(events.prefix(fitting)), bytes: fittingBytes)
                state.termination = .overflowed
            } else {
                state.append(events, bytes: bytes)
            }
            let waiter = state.waiter
            state.waiter = nil
            return (state.termination == nil ? .accepted : .overflowed, waiter)
        }
        waiter?.wake()
        return result
    }

    /// Ends the stream after the buffered events; further offers are refused.
    func finish() {
        let waiter = state.withLock { state -> Waiter? in
            if state.termination == nil { state.termination = .finished }
            let waiter = state.waiter
            state.waiter = nil
            return waiter
        }
        waiter?.wake()
    }

    /// Takes up to `limit` buffered events, waiting while the buffer is empty.
    ///
    /// Ends with ``Take/finished`` when the stream has finished or the task was
    /// cancelled, and throws ``SubscriptionOverflowError`` once the buffered
    /// events of an overflowed mailbox have been taken.
    func take(
        upTo limit: Int,
        bytes byteLimit: Int = .max,
        isolation: isolated (any Actor)? = #isolation
    ) async throws(SubscriptionOverflowError) -> Take {
        while true {
            if let outcome = try poll(upTo: limit, bytes: byteLimit) { return outcome }
            if Task.isCancelled {
                finish()
                continue
            }
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    if !register(.task(continuation)) { continuation.resume() }
                }
            } onCancel: {
                finish()
            }
        }
    }

    /// What ``take(upTo:isolation:)`` would return now, or nil when it would wait.
    func poll(upTo limit: Int, bytes byteLimit: Int = .max) throws(SubscriptionOverflowError) -> Take? {
        let outcome = state.withLock { state -> Result<Take, SubscriptionOverflowError>? in
            if state.count > 0 {
                state.heartbeatDue = false
                return .success(.events(state.take(upTo: limit, bytes: byteLimit)))
            }
            switch state.termination {
            case .finished?: return .success(.finished)
            case .overflowed?: return .failure(SubscriptionOverflowError(capacity: capacity))
            case nil: break
            }
            if state.heartbeatDue {
                state.heartbeatDue = false
                return .success(.heartbeat)
            }
            return nil
        }
        return try outcome?.get()
    }

    /// Calls `wake` once, as soon as ``poll(upTo:)`` has something to return:
    /// at once if it has now, else from the thread that offers or finishes.
    func whenReady(_ wake: @escaping @Sendable () -> Void) {
        if !register(.callback(wake)) { wake() }
    }

    /// Keeps `waiter` for the next offer; false when there is something to take already.
    private func register(_ waiter: Waiter) -> Bool {
        state.withLock { state in
            precondition(state.waiter == nil, "a subscription has a single consumer")
            if state.count > 0 || state.termination != nil || state.heartbeatDue { return false }
            state.waiter = waiter
            return true
        }
    }
}

/// A subscriber fell further behind than its buffer allows and was dropped.
///
/// Everything up to the overflow was delivered. Resubscribe and refetch the
/// state you display; events in between are not replayed.
public struct SubscriptionOverflowError: Error, Hashable, CustomStringConvertible {
    /// The buffer size that was exceeded.
    public var capacity: Int

    public var description: String {
        "subscriber fell more than \(capacity) events behind and was dropped; resubscribe and refetch"
    }
}
