import Herald
import Logging
#if canImport(Glibc)
import Glibc
#endif

extension PostgresListener {
    /// Reads, decodes and publishes the notifications of one connection, and
    /// records checkpoints in durable mode.
    struct Receiver {
        let listener: PostgresListener
        let connection: LibpqConnection
        private let backendPID: Int32
        /// Ticks of every daemon on this database arrive here; only our own count.
        private let tickChannel: [CChar]
        private var batch: ReceiverBatch
        private var schedule: ReceiverSchedule
        /// Durable mode: when to read the journal and when to park.
        private var parking: ParkingStateMachine?
        /// Parked, the events that reached the listener without their notification.
        private var announcements = ParkedAnnouncements()
        private var probes: ProbeClock

        init(listener: PostgresListener, connection: LibpqConnection, durable: Bool, resumable: Bool) {
            self.listener = listener
            self.connection = connection
            batch = ReceiverBatch(capacity: PostgresListener.maximumBatch, resumable: resumable)
            let configuration = listener.configuration
            schedule = ReceiverSchedule(
                backstopInterval: configuration.backstopInterval, checkpointInterval: configuration.checkpointInterval,
                observedTickSpacing: PostgresListener.durableFeedTickSpacing, replanInterval: PostgresListener.replanInterval, now: .now
            )
            probes = ProbeClock(interval: listener.configuration.probeInterval, timeout: listener.configuration.connectTimeout, now: .now)
            if durable { parking = ParkingStateMachine(policy: listener.configuration.parking, now: .now) }
            self.backendPID = connection.backendPID
            self.tickChannel = Array(listener.tickChannel.utf8CString)
        }

        /// Runs until the connection fails or the listener is stopped.
        mutating func run(cursor: inout DeliveryCursor?) -> LibpqError {
            // What the checkpoint it starts from covers was delivered by an earlier run.
            listener.recordDelivered(through: cursor?.covered)
            while true {
                listener.health.recordProgress()
                do throws(LibpqError) {
                    // Queries (sweeps, ticks, references) leave notifications in libpq's buffer: take those first.
                    try drain(cursor: &cursor)
                    if probes.isOverdue(now: .now) {
                        return probeFailed("a probe sent \(listener.configuration.connectTimeout.secondsText) ago has not come back")
                    }
                    if probes.isDue(now: .now) {
                        try sendProbe()
                        continue
                    }
                    if cursor != nil, schedule.isReplanDue(now: .now) {
                        schedule.replanned(now: .now)
                        try connection.forgetPreparedStatements(timeout: listener.configuration.connectTimeout)
                        continue
                    }
                    var deadline = ContinuousClock.now + PostgresListener.idleWake
                    if cursor != nil, let action = parking?.next(now: .now) {
                        switch action {
                        case .sweep:
                            try sweep(cursor: &cursor!)
                            continue
                        case .park:
                            try mark(parked: true)
                            parking!.didPark()
                            // At once: a notification taken before it would be delivered ahead of what it finds.
                            try sweep(cursor: &cursor!)
                            continue
                        case .unpark:
                            try mark(parked: false)
                            cursor!.unparked()
                            announcements.unparked()
                            parking!.didUnpark(now: .now)
                            continue
                        case .wait(let until):
                            deadline = min(deadline, until)
                        }
                        if try saveCheckpointIfDue(cursor: &cursor!) { continue }
                        if parking!.isParked, cursor!.pendingTick == nil {
                            let deliveredLive = !cursor!.deliveredLive.isEmpty
                            if schedule.isTickDue(deliveredLive: deliveredLive, observed: listener.hasDeliveryObservers, now: .now) {
                                try sendTick(cursor: &cursor!)
                                continue
                            }
                            deadline = min(deadline, schedule.nextTick(deliveredLive: deliveredLive, observed: listener.hasDeliveryObservers))
                        }
                    }
                    do {
                        try connection.awaitInput(until: min(deadline, probes.deadline))
                    } catch where error.code == .timedOut {
                        // Time to sweep, or to show the watchdog the loop still turns.
                    }
                } catch where error.code == .timedOut {
                    return probeFailed("a query got no answer within \(listener.configuration.connectTimeout.secondsText)")
                } catch {
                    return error
                }
            }
        }

        /// Records how far the journal has been delivered, at most once per checkpoint interval.
        private mutating func saveCheckpointIfDue(cursor: inout DeliveryCursor) throws(LibpqError) -> Bool {
            guard cursor.needsCheckpoint, schedule.isCheckpointDue(now: .now), let covered = cursor.covered else { return false }
            schedule.checkpointSaved(now: .now)
            try Journal.saveCheckpoint(of: listener.configuration.name, covered, on: connection)
            cursor.checkpointSaved(covered)
            listener.logger.debug("checkpoint", metadata: ["snapshot": "\(covered)"])
            return true
        }

        private func recordBackstop(_ events: Int, upTo snapshot: TransactionSnapshot) {
            guard events > 0 else { return }
            listener.recordBackstop(events: events)
            listener.logger.warning("the backstop found events whose notification never came", metadata: [
                "events": "\(events)", "up_to": "\(snapshot)",
            ])
        }

        /// Marks this daemon parked (writers ring the doorbell) or reading (they do not).
        mutating func mark(parked: Bool) throws(LibpqError) {
            let result = try connection.execute(
                "SELECT pgherald.park($1, $2)", parameters: [listener.configuration.name, parked ? "true" : "false"],
                timeout: listener.configuration.connectTimeout
            )
            listener.recordParked(parked)
            listener.logger.trace(parked ? "parked" : "reading the journal", metadata: ["parked_daemons": "\(result.scalar ?? nil ?? "?")"])
        }

        /// Reads the journal up to now, or up to a tick's snapshot, and delivers
        /// what no notification brought.
        /// - Returns: how many events it delivered.
        @discardableResult
        mutating func sweep(cursor: inout DeliveryCursor, upTo tick: TransactionSnapshot? = nil) throws(LibpqError) -> Int {
            guard let covered = cursor.covered else {
                // A first start begins now.
                cursor.swept(to: try Journal.currentSnapshot(on: connection))
                listener.recordDelivered(through: cursor.covered)
                parking?.swept(found: 0, full: false, unrung: false, now: .now)
                return 0
            }
            let (snapshot, first) = try Journal.sweep(after: covered, upTo: tick, limit: PostgresListener.catchUpPageSize, on: connection)
            if tick == nil { cursor.tickOvertaken() }
            // Delivery order, not transaction-id order: of two transactions that wrote the same row, the one that
            // committed first. A sweep that fits one page is put in order as it came; a longer one is read again in order.
            var range = JournalRange(older: covered, newer: snapshot)
            var page = try range.firstPage(from: first, limit: PostgresListener.catchUpPageSize, on: connection)
            var delivered = 0
            var deliveries = 0
            var backstopped = 0
            var pages = 1
            while true {
                for row in page.rows where cursor.admitSwept(id: row.id, transactionID: row.transactionID) {
                    do {
                        batch.admit(try Event(payload: row.event))
                    } catch {
                        listener.logger.error("a journal event cannot be read", metadata: ["event_id": "\(row.id)", "reason": "\(error)"])
                        continue
                    }
                    // Parked and confirmed by a tick, an event that no notification brought was lost on the way;
                    // found by another sweep, it is lost if the next tick arrives before its notification.
                    if parking?.isParked == true, !cursor.isUnrung(row.transactionID),
                        announcements.found(transactionID: row.transactionID, confirmed: tick != nil) {
                        backstopped += 1
                    }
                }
                let published = batch.admitted.count
                delivered += published
                try publishAdmitted(covered: covered)
                deliveries += published * listener.broker.subscribersReachedByLastPublish
                if page.isLast { break }
                page = try range.page(
                    after: page.rows.last.map { ($0.transactionID, $0.id) }, limit: PostgresListener.catchUpPageSize, on: connection
                )
                pages += 1
            }
            if parking?.isClosing == true {
                cursor.parked(sweptTo: snapshot)
            } else {
                cursor.swept(to: snapshot)
            }
            listener.recordDelivered(through: cursor.covered)
            announcements.swept(to: snapshot)
            parking?.swept(found: delivered, deliveries: deliveries, full: pages > 1, unrung: !cursor.unrung.isEmpty, now: .now)
            recordBackstop(backstopped, upTo: snapshot)
            return delivered
        }

        /// Notifies ourselves on the tick channel: the probe comes back the way events do, or the path is broken.
        private mutating func sendProbe() throws(LibpqError) {
            let probe = probes.send(now: .now)
            do {
                try connection.execute(
                    "SELECT pg_notify($1, $2)", parameters: [listener.tickChannel, "\(Self.probePrefix)\(probe)"],
                    timeout: listener.configuration.connectTimeout
                )
            } catch where error.code == .timedOut {
                // A connection that swallows traffic without closing holds the probe's own query.
                throw probeFailed("a probe got no answer within \(listener.configuration.connectTimeout.secondsText)")
            }
        }

        /// Counts a lost probe and says why the connection is given up.
        private func probeFailed(_ reason: String) -> LibpqError {
            listener.recordProbeFailure()
            return LibpqError(.connectionLost, "notifications stopped arriving: \(reason)")
        }

        static let probePrefix = "probe "

        /// Publishes everything that has arrived.
        ///
        /// A burst (a large transaction) arrives in many socket reads. Reading
        /// on while input is already waiting lets one publish carry many
        /// events, so subscribers wake once per batch; batches never exceed
        /// ``PostgresListener/maximumBatch`` notifications (one notification
        /// may carry a statement's events).
        mutating func drain(cursor: inout DeliveryCursor?) throws(LibpqError) {
            while true {
                // Rings as fast as a run of writers commits keep input waiting: the
                // loop above must get to unpark, or they would notify for as long as the run lasts.
                if parking?.next(now: .now) == .unpark { return }
                let room = batch.room
                if take(limit: room) == room {
                    try publish(cursor: &cursor)
                } else if connection.hasWaitingInput {
                    try connection.readInput()
                    continue
                } else if batch.isIdle {
                    return
                } else {
                    // Publishing may run queries, during which more notifications arrive.
                    try publish(cursor: &cursor)
                }
                // Writers that ring faster than the wake rate keep input waiting; with all
                // published, return, so that the loop unparks and they stop notifying.
                if parking?.next(now: .now) == .unpark { return }
            }
        }

        private mutating func take(limit: Int) -> Int {
            let taken = connection.takeNotifications(limit: limit) { channel, payload, senderPID in
                if payload.first != UInt8(ascii: "{"), strcmp(channel, tickChannel) == 0 {
                    guard senderPID == backendPID else { return }
                    let text = String(decoding: payload, as: UTF8.self)
                    if !text.hasPrefix(Self.probePrefix), let snapshot = TransactionSnapshot(text) { batch.tickArrived(snapshot) }
                    return
                }
                // A statement's events arrive together, separated by U+001E. Walked in place:
                // most notifications hold one event, and this runs for every one.
                var rest = payload[...]
                while !rest.isEmpty {
                    let end = rest.firstIndex(of: Journal.batchSeparator) ?? rest.endIndex
                    let part = UnsafeBufferPointer(rebasing: rest[..<end])
                    rest = end == rest.endIndex ? rest[end...] : rest[(end + 1)...]
                    if !part.isEmpty { arrive(part, senderPID: senderPID) }
                }
            }
            if taken > 0 { probes.heard() }
            return taken
        }

        /// Decodes one event, or a reference to events in the journal.
        private mutating func arrive(_ part: UnsafeBufferPointer<UInt8>, senderPID: Int32) {
            do {
                batch.arrive(.event(try Event(payload: part)))
            } catch {
                if let reference = JournalReference(payload: part) {
                    batch.arrive(.reference(reference))
                    return
                }
                listener.logger.warning("skipped a notification that is not a pgherald event", metadata: [
                    "reason": "\(error)",
                    "sender_pid": "\(senderPID)",
                    "payload": "\(String(decoding: part.prefix(160), as: UTF8.self))",
                ])
            }
        }

        /// Admits a live event if the cursor says to deliver it. Events sent by
        /// hand with `pg_notify` carry no journal position and are delivered as they come.
        private mutating func admitLive(_ event: Event, cursor: DeliveryCursor?) {
            guard let cursor, let id = UInt64(event.id), let transactionID = UInt64(event.transactionID) else {
                batch.admit(event)
                return
            }
            batch.rang()
            announcements.rang(transactionID)
            switch cursor.live(id: id, transactionID: transactionID, parked: parking?.isParked ?? false) {
            case .deliver:
                batch.admit(event, position: (id, transactionID))
            case .skip:
                break
            case .sweep:
                if parking?.isParked == true { announcements.leftToSweep(transactionID) }
                parking?.sweepSoon(now: .now)
            }
        }

        private mutating func publish(cursor: inout DeliveryCursor?) throws(LibpqError) {
            if !batch.arrivals.isEmpty {
                for arrival in batch.arrivals {
                    switch arrival {
                    case .event(let event):
                        admitLive(event, cursor: cursor)
                    case .reference(let reference):
                        try read(reference, cursor: cursor)
                    }
                }
                batch.arrivalsTaken()
                try publishAdmitted(covered: cursor?.covered)
                batch.recordPositions(in: &cursor)
                parking?.rang(batch.takeRings(), now: .now)
            }
            if let tick = batch.takeTick() {
                // A sweep up to the tick: what it finds, no notification brought.
                if let confirmed = cursor?.tickArrived(tick), parking?.isParked == true {
                    recordBackstop(announcements.tickConfirmed(confirmed), upTo: confirmed)
                    try sweep(cursor: &cursor!, upTo: confirmed)
                }
            }
        }

        /// Hands the admitted events to the broker, at most a batch at a time.
        /// - Parameter covered: the cursor's covered snapshot: the step the events are delivered in (``DeliveryRecord``).
        private mutating func publishAdmitted(covered: TransactionSnapshot?) throws(LibpqError) {
            if listener.broker.marksTransactionEnds { try markTransactionEnds() }
            if let covered, !batch.admitted.isEmpty {
                listener.deliveries.record(batch.admitted.lazy.compactMap { UInt64($0.transactionID) }, covered: covered)
            }
            var start = batch.admitted.startIndex
            while start < batch.admitted.endIndex {
                let end = min(start + PostgresListener.maximumBatch, batch.admitted.endIndex)
                listener.recordLag(of: listener.broker.publish(batch.admitted[start..<end], resumable: batch.resumable))
                start = end
            }
            batch.admittedPublished()
        }

        /// Marks the admitted events that end their transaction, for whatever
        /// groups events by transaction. A transaction's events arrive
        /// together and in order, by notification or by sweep, so one followed
        /// by another transaction's ends its own. In durable mode, the last one
        /// ends its transaction when the journal holds no later event of it:
        /// the transaction has committed, so the journal's answer is final.
        private mutating func markTransactionEnds() throws(LibpqError) {
            batch.markTransactionEndsBeforeTheLast()
            // Without a journal, nothing says whether more of the last transaction follows.
            guard let event = batch.admitted.last, listener.health.durability == .durable else { return }
            // Events sent by hand carry no journal position: each stands alone.
            if let transactionID = UInt64(event.transactionID), let id = UInt64(event.id),
                let journalLast = try Journal.lastEventID(ofTransaction: transactionID, on: connection), journalLast > id {
                return
            }
            batch.endLastTransaction()
        }

        /// Reads from the journal the events a notification referred to: one
        /// too large to notify, or a statement's too many.
        private mutating func read(_ reference: JournalReference, cursor: DeliveryCursor?) throws(LibpqError) {
            let rows = try Journal.events(
                transactionID: reference.transactionID, from: reference.id, through: reference.lastID, on: connection
            )
            if rows.isEmpty {
                listener.logger.error("referenced events are missing from the journal", metadata: [
                    "event_id": "\(reference.id)", "through": "\(reference.lastID)",
                ])
            }
            for row in rows {
                let event: Event
                do {
                    event = try Event(payload: row.event)
                } catch {
                    listener.logger.error("a journal event cannot be read", metadata: ["event_id": "\(row.id)", "reason": "\(error)"])
                    continue
                }
                admitLive(event, cursor: cursor)
            }
        }

        /// Takes a snapshot and notifies ourselves with it in one statement.
        private mutating func sendTick(cursor: inout DeliveryCursor) throws(LibpqError) {
            schedule.tickSent(now: .now)
            // The tick arrives in libpq's buffer while this runs; the next drain takes it.
            let result = try connection.execute(
                "SELECT s::text, pg_notify($1, s::text) FROM pg_current_snapshot() AS s",
                parameters: [listener.tickChannel], timeout: listener.configuration.connectTimeout
            )
            guard let text = result.scalar, let snapshot = TransactionSnapshot(text) else {
                throw LibpqError(.queryFailed, "unexpected snapshot from a tick")
            }
            cursor.tickSent(snapshot: snapshot)
        }

        /// After LISTEN: marks this daemon reading, delivers from the journal
        /// everything committed since the last checkpoint that has not been
        /// delivered, and records the checkpoint.
        mutating func catchUp(cursor: inout DeliveryCursor) throws(LibpqError) {
            try mark(parked: false)
            let from = cursor.covered
            let delivered = try sweep(cursor: &cursor)
            batch.caughtUp()
            if let from {
                listener.recordCatchUp(events: delivered)
                listener.logger.info("caught up from the journal", metadata: [
                    "events": "\(delivered)", "from": "\(from)", "to": "\(cursor.covered.map { "\($0)" } ?? "?")",
                ])
            }
            schedule.checkpointAtOnce(now: .now)
            _ = try saveCheckpointIfDue(cursor: &cursor)
        }

        /// Before a graceful stop: stops the doorbell, delivers everything
        /// committed so far, and records a checkpoint that covers exactly what
        /// was delivered, naming the last event, so that the next start
        /// neither repeats nor skips one.
        mutating func finish(cursor: inout DeliveryCursor) throws(LibpqError) {
            try mark(parked: false)
            cursor.unparked()
            try sweep(cursor: &cursor)
            guard let covered = cursor.covered else { return }
            try Journal.saveCheckpoint(of: listener.configuration.name, covered, lastEventID: cursor.lastDeliveredEventID, on: connection)
            cursor.checkpointSaved(covered)
        }
    }
}
