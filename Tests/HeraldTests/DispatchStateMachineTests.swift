import Herald
import HeraldWebhooks
import Testing

/// The webhook dispatcher's transitions, without a database or a receiver.
@Suite struct DispatchStateMachineTests {
    let start = ContinuousClock.now

    func delivery(_ id: Int, source: PendingDelivery.Source = .handedOver, attempts: Int = 1) -> PendingDelivery {
        PendingDelivery(source: source, eventID: String(id), body: Array("{}".utf8), attempts: attempts, age: .zero)
    }

    func completion(_ delivery: PendingDelivery, _ decision: DeliveryDecision) -> CompletedDelivery {
        CompletedDelivery(delivery: delivery, decision: decision)
    }

    static let failure = DeliveryOutcome.retryable(status: 503, error: "HTTP 503", retryAfter: nil)

    @Test func theFeedIsOfferedTheRoomNotInUseAndOnlyInLargeRounds() {
        var machine = DispatchStateMachine(concurrency: 4, ordered: false)
        #expect(machine.capacity == 16)
        #expect(machine.reserveRoom() == 16)
        #expect(machine.reserveRoom() == 0, "everything is promised")
        #expect(machine.heldBack)
        machine.handOver((1...10).map { delivery($0) }, reserved: 16, heldBack: true)
        #expect(machine.handedOverCount == 10)
        #expect(machine.reserveRoom() == 0, "6 free is less than half the capacity")
        machine.releaseRoom(0)
        #expect(machine.reserved == 0)
    }

    @Test func anOrderedOrStoppingEndpointIsFedThroughRows() {
        var ordered = DispatchStateMachine(concurrency: 1, ordered: true)
        #expect(ordered.reserveRoom() == nil)
        var stopping = DispatchStateMachine(concurrency: 4, ordered: false)
        stopping.stop()
        #expect(stopping.reserveRoom() == nil)
    }

    @Test func aRoundLeasesDueRowsFirstThenSendsHandedOverDeliveriesInTheRestOfTheSlots() {
        var machine = DispatchStateMachine(concurrency: 4, ordered: false)
        machine.handOver((1...6).map { delivery($0) }, reserved: 0, heldBack: false)
        #expect(machine.nextRound(now: start, databaseDown: false) == .send(slots: 4, generation: 0, leaseRows: true))
        let sending = machine.leased(1, slots: 4, leaseRows: true, leaseFailed: false)
        #expect(sending.handedOver.map(\.eventID) == ["1", "2", "3"])
        #expect(sending.thenWait == DispatchStateMachine.pollInterval)
        #expect(machine.inFlight == 4 && machine.handedOverCount == 3)
        #expect(!machine.rowsMayBeDue, "fewer rows than slots came back: none are due")
        #expect(machine.nextRound(now: start, databaseDown: false) == .wait(DispatchStateMachine.pollInterval), "every slot is busy")
    }

    @Test func aFullLeaseGoesRoundAgainAtOnce() {
        var machine = DispatchStateMachine(concurrency: 2, ordered: false)
        _ = machine.nextRound(now: start, databaseDown: false)
        let sending = machine.leased(2, slots: 2, leaseRows: true, leaseFailed: false)
        #expect(sending.thenWait == nil)
        #expect(machine.rowsMayBeDue)
    }

    @Test func rowsAreLookedForAgainAfterThePollIntervalOrWhenQueued() {
        var machine = DispatchStateMachine(concurrency: 2, ordered: false)
        _ = machine.nextRound(now: start, databaseDown: false)
        _ = machine.leased(0, slots: 2, leaseRows: true, leaseFailed: false)
        #expect(machine.nextRound(now: start + .milliseconds(10), databaseDown: false) == .send(slots: 2, generation: 0, leaseRows: false))
        _ = machine.leased(0, slots: 2, leaseRows: false, leaseFailed: false)
        #expect(machine.nextRound(now: start + .seconds(1), databaseDown: false) == .send(slots: 2, generation: 0, leaseRows: true))
        _ = machine.leased(0, slots: 2, leaseRows: true, leaseFailed: false)
        machine.rowsQueued()
        #expect(machine.nextRound(now: start + .seconds(1), databaseDown: false) == .send(slots: 2, generation: 0, leaseRows: true))
    }

    @Test func aFailedLeaseWaitsAPollIntervalAndKeepsRowsDue() {
        var machine = DispatchStateMachine(concurrency: 2, ordered: false)
        _ = machine.nextRound(now: start, databaseDown: false)
        let sending = machine.leased(0, slots: 2, leaseRows: true, leaseFailed: true)
        #expect(sending.thenWait == DispatchStateMachine.pollInterval)
        #expect(machine.rowsMayBeDue)
    }

    @Test func aDatabaseThatCannotRecordOutcomesSendsNothingAndKeepsThemFirst() {
        var machine = DispatchStateMachine(concurrency: 2, ordered: false)
        _ = machine.nextRound(now: start, databaseDown: false)
        _ = machine.leased(1, slots: 2, leaseRows: true, leaseFailed: false)
        _ = machine.attemptFinished(completion(delivery(1, source: .queued(seq: 1)), .done), outcome: .delivered(status: 200), generation: 0, now: start, jitter: 0)
        let taken = machine.takeCompletions()
        #expect(taken.count == 1 && machine.completions.isEmpty)
        machine.completionsNotRecorded(taken)
        #expect(machine.nextRound(now: start, databaseDown: true) == .wait(DispatchStateMachine.pollInterval))
        #expect(machine.takeCompletions() == taken)
    }

    @Test func aSuccessCountsAndFillsTheFreedSlotWithTheNextHandedOverDelivery() {
        var machine = DispatchStateMachine(concurrency: 1, ordered: false)
        machine.handOver([delivery(1), delivery(2)], reserved: 0, heldBack: true)
        _ = machine.nextRound(now: start, databaseDown: false)
        #expect(machine.leased(0, slots: 1, leaseRows: false, leaseFailed: false).handedOver.map(\.eventID) == ["1"])
        let after = machine.attemptFinished(completion(delivery(1), .done), outcome: .delivered(status: 204), generation: 0, now: start, jitter: 0)
        #expect(after.next?.eventID == "2")
        #expect(machine.inFlight == 1)
        #expect(after.askFeedForMore, "events wait in the journal, and 3 of the 4 places are free")
        #expect(machine.counters.attempts == 1 && machine.counters.successes == 1 && machine.counters.lastStatus == 204)
        let last = machine.attemptFinished(completion(delivery(2), .done), outcome: .delivered(status: 204), generation: after.generation, now: start, jitter: 0)
        #expect(last.next == nil)
        #expect(last.askFeedForMore)
    }

    @Test func freedRoomAsksTheFeedForNothingWhenNoEventWaitsInTheJournal() {
        var machine = DispatchStateMachine(concurrency: 1, ordered: false)
        machine.handOver([delivery(1)], reserved: 0, heldBack: false)
        _ = machine.nextRound(now: start, databaseDown: false)
        _ = machine.leased(0, slots: 1, leaseRows: false, leaseFailed: false)
        let after = machine.attemptFinished(completion(delivery(1), .done), outcome: .delivered(status: 200), generation: 0, now: start, jitter: 0)
        #expect(!after.askFeedForMore)
    }

    @Test func aRetryableFailureClosesTheGateSchedulesTheRetryAndTurnsHandedOverDeliveriesIntoRows() {
        var machine = DispatchStateMachine(concurrency: 4, ordered: false)
        machine.handOver((1...3).map { delivery($0) }, reserved: 0, heldBack: false)
        _ = machine.nextRound(now: start, databaseDown: false)
        _ = machine.leased(0, slots: 1, leaseRows: true, leaseFailed: false)
        let after = machine.attemptFinished(
            completion(delivery(1), .retry(after: .seconds(5))), outcome: Self.failure, generation: 0, now: start, jitter: 0
        )
        #expect(after.next == nil, "the gate is closed")
        #expect(machine.gate.isFailing)
        #expect(machine.nextRetry == start + .seconds(5))
        #expect(machine.counters.failures == 1 && machine.counters.retries == 1)
        #expect(machine.nextRound(now: start, databaseDown: false) == .recordUnsent)
        let unsent = machine.takeCompletions().dropFirst()
        #expect(unsent.map(\.delivery.eventID) == ["2", "3"])
        #expect(unsent.allSatisfy { $0.decision == .retry(after: .zero) && $0.delivery.attempts == 0 })
        #expect(machine.handedOverCount == 0)
    }

    @Test func aFailingReceiverIsProbedWithOneEventWhenNoRowIsDue() {
        var machine = DispatchStateMachine(concurrency: 4, ordered: false)
        _ = machine.nextRound(now: start, databaseDown: false)
        _ = machine.leased(1, slots: 4, leaseRows: true, leaseFailed: false)
        _ = machine.attemptFinished(completion(delivery(1, source: .queued(seq: 1)), .retry(after: .seconds(1))), outcome: Self.failure, generation: 0, now: start, jitter: 0)
        #expect(machine.reserveRoom() == 0, "no probe asked for yet")
        let reopened = start + .seconds(60)
        guard case .send(let slots, _, let leaseRows) = machine.nextRound(now: reopened, databaseDown: false) else {
            Issue.record("the gate lets a probe through after its backoff")
            return
        }
        #expect(slots == 1 && leaseRows)
        let sending = machine.leased(0, slots: 1, leaseRows: true, leaseFailed: false)
        #expect(sending.askFeedForProbe)
        #expect(machine.reserveRoom() == 1, "one event to probe with")
        #expect(machine.reserveRoom() == 0)
    }

    @Test func aDeadLetterCountsAsAFailure() {
        var machine = DispatchStateMachine(concurrency: 1, ordered: false)
        _ = machine.nextRound(now: start, databaseDown: false)
        _ = machine.leased(1, slots: 1, leaseRows: true, leaseFailed: false)
        _ = machine.attemptFinished(
            completion(delivery(1, source: .queued(seq: 1)), .deadLetter(reason: "refused")),
            outcome: .permanent(status: 400, error: "HTTP 400"), generation: 0, now: start, jitter: 0
        )
        #expect(machine.counters.deadLettered == 1 && machine.counters.failures == 1)
        #expect(!machine.gate.isFailing, "a refusal proves the receiver is up")
    }

    @Test func stoppingWaitsForAnswersAndRecordsThenStops() {
        var machine = DispatchStateMachine(concurrency: 2, ordered: false)
        _ = machine.nextRound(now: start, databaseDown: false)
        _ = machine.leased(1, slots: 2, leaseRows: true, leaseFailed: false)
        machine.handOver([delivery(7)], reserved: 0, heldBack: false)
        machine.stop()
        #expect(machine.nextRound(now: start, databaseDown: false) == .recordUnsent)
        _ = machine.takeCompletions()
        #expect(machine.nextRound(now: start, databaseDown: false) == .wait(DispatchStateMachine.pollInterval), "one request is in flight")
        let after = machine.attemptFinished(completion(delivery(1, source: .queued(seq: 1)), .done), outcome: .delivered(status: 200), generation: 0, now: start, jitter: 0)
        #expect(after.next == nil)
        #expect(machine.nextRound(now: start, databaseDown: false) == .wait(DispatchStateMachine.pollInterval), "its outcome is not recorded yet")
        _ = machine.takeCompletions()
        #expect(machine.nextRound(now: start, databaseDown: false) == .stopped)
    }
}
