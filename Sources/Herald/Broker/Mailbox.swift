import DequeModule
import Synchronization

/// A bounded single-consumer queue between the broker and one subscriber.
///
/// `offer` never blocks: the broker's publishing thread must not wait on any
/// subscriber. When the buffer is full the mailbox closes with an overflow;
/// the consumer still receives what was buffered, then the overflow error.
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
        var waiter: Waiter?
        var termination: Termination?
        var heartbeatDue = false

        mutating func append(_ events: [Event]) {
            guard !events.isEmpty else { return }
            buffer.append(events)
            count += events.count
        }

        mutating func take(upTo limit: Int) -> [Event] {
            if taken == 0, buffer[0].count <= limit, buffer.count == 1 || buffer[0].count + buffer[1].count > limit {
                count -= buffer[0].count
                return buffer.removeFirst()
            }
            var events: [Event] = []
            events.reserveCapacity(min(limit, count))
            while events.count < limit, let first = buffer.first {
                let end = min(first.count, taken + limit - events.count)
                events += first[taken..<end]
                if end == first.count {
                    buffer.removeFirst()
                    taken = 0
                } else {
                    taken = end
                }
            }
            count -= events.count
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
    /// Whether ``requestHeartbeat()`` wakes this mailbox's consumer.
    let wantsHeartbeats: Bool
    private let state = Mutex(State())

    init(capacity: Int, wantsHeartbeats: Bool = false) {
        precondition(capacity > 0, "a mailbox needs room for at least one event")
        self.capacity = capacity
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

    /// Appends events in order. If they do not all fit, those that fit are
    /// kept and the mailbox closes with an overflow.
    func offer(_ events: [Event]) -> OfferResult {
        let (result, waiter) = state.withLock { state -> (OfferResult, Waiter?) in
            guard state.termination == nil else { return (.closed, nil) }
            let room = capacity - state.count
            if events.count > room {
                state.append(Array(events.prefix(room)))
                state.termination = .overflowed
            } else {
                state.append(events)
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
        isolation: isolated (any Actor)? = #isolation
    ) async throws(SubscriptionOverflowError) -> Take {
        while true {
            if let outcome = try poll(upTo: limit) { return outcome }
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
    func poll(upTo limit: Int) throws(SubscriptionOverflowError) -> Take? {
        let outcome = state.withLock { state -> Result<Take, SubscriptionOverflowError>? in
            if state.count > 0 {
                state.heartbeatDue = false
                return .success(.events(state.take(upTo: limit)))
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
