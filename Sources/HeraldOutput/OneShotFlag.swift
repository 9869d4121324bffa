import Synchronization

/// A yes-or-no answer that arrives once, for any number of waiters: whether
/// a socket came to serve, or an output to be ready, before it ended.
public final class OneShotFlag: Sendable {
    private let state = Mutex<(answer: Bool?, waiters: [CheckedContinuation<Bool, Never>])>((nil, []))

    public init() {}

    /// Answers every waiter, present and future; later answers are ignored.
    public func set(_ answer: Bool) {
        let waiters = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            guard state.answer == nil else { return [] }
            state.answer = answer
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: answer) }
    }

    /// The answer, once given.
    public var answer: Bool? { state.withLock { $0.answer } }

    public func wait() async -> Bool {
        await withCheckedContinuation { continuation in
            let answer = state.withLock { state -> Bool? in
                if state.answer == nil { state.waiters.append(continuation) }
                return state.answer
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }
}
