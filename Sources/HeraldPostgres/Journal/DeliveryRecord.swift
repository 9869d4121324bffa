public import Herald
import DequeModule
import Synchronization

/// Where each recent transaction was delivered: in which step, and after
/// which transactions of it. A replay that resumes after one of them reads
/// the journal from its step's start and skips what came before it there,
/// so that it repeats nothing; a checkpoint, taken once a second or so,
/// would replay the transactions delivered between it and the resumed one.
///
/// A step is what the listener delivered while its covered snapshot stood
/// still: notifications, then the sweep that moves the snapshot on. Every
/// transaction delivered before another one is visible in the later one's
/// step snapshot, or was delivered in the same step before it.
public final class DeliveryRecord: Sendable {
    /// Transactions remembered; the oldest steps are forgotten past it, and
    /// their replays start at a checkpoint. Default 65,536.
    public let capacity: Int
    private let state = Mutex(State())

    private struct Step {
        /// The listener's covered snapshot while the step delivered.
        var snapshot: TransactionSnapshot
        var transactions: [UInt64] = []
    }

    private struct State {
        var steps: Deque<Step> = []
        /// The absolute number of `steps.first`.
        var firstStep = 0
        var stepOf: [UInt64: Int] = [:]
        var remembered = 0
    }

    /// Where a replay after a transaction starts, and what it skips.
    public struct Position: Sendable, Equatable {
        /// Everything visible in it was delivered before the transaction.
        public var older: TransactionSnapshot
        /// Transactions of its step delivered before it.
        public var deliveredBefore: Set<UInt64>
    }

    public init(capacity: Int = 65_536) {
        self.capacity = capacity
    }

    /// Records `transactionIDs`, in the order delivered, while the
    /// listener's covered snapshot is `covered`.
    public func record(_ transactionIDs: some Sequence<UInt64>, covered: TransactionSnapshot) {
        state.withLock { state in
            if state.steps.last?.snapshot != covered { state.steps.append(Step(snapshot: covered)) }
            let step = state.firstStep + state.steps.count - 1
            for transaction in transactionIDs where state.stepOf[transaction] == nil {
                state.stepOf[transaction] = step
                state.steps[state.steps.count - 1].transactions.append(transaction)
                state.remembered += 1
            }
            while state.remembered > capacity, state.steps.count > 1 {
                let oldest = state.steps.removeFirst()
                state.firstStep += 1
                state.remembered -= oldest.transactions.count
                for transaction in oldest.transactions { state.stepOf[transaction] = nil }
            }
        }
    }

    /// Where a replay that resumes in `transactionID` starts, if it is remembered.
    public func position(of transactionID: UInt64) -> Position? {
        state.withLock { state in
            guard let number = state.stepOf[transactionID] else { return nil }
            let step = state.steps[number - state.firstStep]
            return Position(older: step.snapshot, deliveredBefore: Set(step.transactions.prefix { $0 != transactionID }))
        }
    }
}
