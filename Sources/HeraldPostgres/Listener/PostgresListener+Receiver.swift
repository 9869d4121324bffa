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
        let connection: PostgresConnection
        private let backendPID: Int32
        /// Ticks of every daemon on this database arrive here; only our own count.
        private let tickChannel: [CChar]
        /// What arrived, in order: events, and references to events still to be read from the journal.
        private var batch: [Arrival] = []
        /// The batch's events as they are published, admitted and with references read.
        private var admitted: [Event] = []
        /// Journal positions of the admitted events, recorded in the cursor only once published.
        private var positions: [(id: UInt64, transactionID: UInt64)] = []
        /// The snapshot of a tick that arrived since the last publish.
        private var arrivedTick: TransactionSnapshot?
        private var lastTick = ContinuousClock.now
        /// When the probe in flight went, if one is.
        private var probeSentAt: ContinuousClock.Instant?
        private var probesSent: UInt64 = 0
        /// Due at once: the first probe proves the LISTEN just made.
        private var lastProbe: ContinuousClock.Instant = .now - .seconds(86_400)

        init(listener: PostgresListener, connection: PostgresConnection) {
            self.listener = listener
            self.connection = connection
            self.backendPID = connection.backendPID
            self.tickChannel = Array(listener.tickChannel.utf8CString)
            batch.reserveCapacity(PostgresListener.maximumBatch)
            admitted.reserveCapacity(PostgresListener.maximumBatch)
        }

        private enum Arrival {
            case event(Event)
            case reference(JournalReference)
        }

        /// Runs until the connection fails or the listener is stopped.
        mutating func run(cursor: inout DeliveryCursor?) -> PostgresError {
            while true {
                listener.recordProgress()
                do throws(PostgresError) {
                    // Queries (catch-up, ticks, references) leave notifications in libpq's buffer: take those first.
                    try drain(cursor: &cursor)
                    if let probeSentAt, ContinuousClock.now >= probeSentAt + listener.configuration.connectTimeout {
                        return probeFailed("a probe sent \(listener.configuration.connectTimeout.secondsText) ago has not come back")
                    }
                    if probeSentAt == nil, ContinuousClock.now >= lastProbe + listener.configuration.probeInterval {
                        try sendProbe()
                        continue
                    }
                    if cursor != nil, ContinuousClock.now >= lastTick + listener.configuration.checkpointInterval {
                        try sendTick(cursor: &cursor!)
                        continue
                    }
                    do {
                        try connection.awaitInput(until: min(tickDeadline(cursor), probeDeadline))
                    } catch where error.code == .timedOut {
                        // Time for a checkpoint, or to show the watchdog the loop still turns.
                    }
                } catch {
                    return error
                }
            }
        }

        /// The next checkpoint, or a second from now: an idle loop still turns, so a wedged one can be told apart.
        private func tickDeadline(_ cursor: DeliveryCursor?) -> ContinuousClock.Instant {
            let idle = ContinuousClock.now + PostgresListener.idleWake
            guard let cursor, cursor.needsCheckpoint else { return idle }
            return min(idle, lastTick + listener.configuration.checkpointInterval)
        }

        /// When the probe in flight is overdue, or the next one is due.
        private var probeDeadline: ContinuousClock.Instant {
            probeSentAt.map { $0 + listener.configuration.connectTimeout } ?? lastProbe + listener.configuration.probeInterval
        }

        /// Notifies ourselves on the tick channel: the probe comes back the way events do, or the path is broken.
        private mutating func sendProbe() throws(PostgresError) {
            probesSent += 1
            lastProbe = .now
            probeSentAt = lastProbe
            do {
                try connection.execute(
                    "SELECT pg_notify($1, $2)", parameters: [listener.tickChannel, "\(Self.probePrefix)\(probesSent)"],
                    timeout: listener.configuration.connectTimeout
                )
            } catch where error.code == .timedOut {
                // A connection that swallows traffic without closing holds the probe's own query.
                throw probeFailed("a probe got no answer within \(listener.configuration.connectTimeout.secondsText)")
            }
        }

        /// Counts a lost probe and says why the connection is given up.
        private func probeFailed(_ reason: String) -> PostgresError {
            listener.recordProbeFailure()
            return PostgresError(.connectionLost, "notifications stopped arriving: \(reason)")
        }

        static let probePrefix = "probe "

        /// Publishes everything that has arrived.
        ///
        /// A burst (a large transaction) arrives in many socket reads. Reading
        /// on while input is already waiting lets one publish carry many
        /// events, so subscribers wake once per batch; batches never exceed
        /// ``PostgresListener/maximumBatch`` notifications (one notification
        /// may carry a statement's events).
        mutating func drain(cursor: inout DeliveryCursor?) throws(PostgresError) {
            while true {
                let room = PostgresListener.maximumBatch - batch.count
                if take(limit: room) == room {
                    try publish(cursor: &cursor)
                } else if connection.hasWaitingInput {
                    try connection.readInput()
                } else if batch.isEmpty, arrivedTick == nil {
                    return
                } else {
                    // Publishing may run queries, during which more notifications arrive.
                    try publish(cursor: &cursor)
                }
            }
        }

        private mutating func take(limit: Int) -> Int {
            let taken = connection.takeNotifications(limit: limit) { channel, payload, senderPID in
                if payload.first != UInt8(ascii: "{"), strcmp(channel, tickChannel) == 0 {
                    guard senderPID == backendPID else { return }
                    let text = String(decoding: payload, as: UTF8.self)
                    if !text.hasPrefix(Self.probePrefix) { arrivedTick = TransactionSnapshot(text) }
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
            // Whatever arrives proves the path, the probe's own notification or
            // not: under a backlog the probe may wait behind events longer than its timeout.
            if taken > 0 { probeSentAt = nil }
            return taken
        }

        /// Decodes one event, or a reference to events in the journal.
        private mutating func arrive(_ part: UnsafeBufferPointer<UInt8>, senderPID: Int32) {
            do {
                batch.append(.event(try Event(payload: part)))
            } catch {
                if let reference = JournalReference(payload: part) {
                    batch.append(.reference(reference))
                    return
                }
                listener.logger.warning("skipped a notification that is not a pgherald event", metadata: [
                    "reason": "\(error)",
                    "sender_pid": "\(senderPID)",
                    "payload": "\(String(decoding: part.prefix(160), as: UTF8.self))",
                ])
            }
        }

        /// Events sent by hand with `pg_notify` carry no journal position and are delivered as they come.
        private mutating func admit(id: String, transactionID: String, cursor: DeliveryCursor?) -> Bool {
            guard let cursor, let id = UInt64(id), let transactionID = UInt64(transactionID) else { return true }
            guard cursor.shouldDeliverLive(id: id, transactionID: transactionID) else { return false }
            positions.append((id, transactionID))
            return true
        }

        private mutating func publish(cursor: inout DeliveryCursor?) throws(PostgresError) {
            if !batch.isEmpty {
                for arrival in batch {
                    switch arrival {
                    case .event(let event):
                        if admit(id: event.id, transactionID: event.transactionID, cursor: cursor) { admitted.append(event) }
                    case .reference(let reference):
                        try read(reference, cursor: cursor)
                    }
                }
                batch.removeAll(keepingCapacity: true)
                var start = admitted.startIndex
                while start < admitted.endIndex {
                    let end = min(start + PostgresListener.maximumBatch, admitted.endIndex)
                    listener.recordLag(of: listener.broker.publish(admitted[start..<end]))
                    start = end
                }
                admitted.removeAll(keepingCapacity: true)
                for position in positions { cursor?.recordDelivered(id: position.id, transactionID: position.transactionID) }
                positions.removeAll(keepingCapacity: true)
            }
            if let tick = arrivedTick {
                arrivedTick = nil
                if let confirmed = cursor?.tickArrived(tick) {
                    // A final checkpoint names the last event, for exact resume after a restart.
                    let lastEventID = cursor!.finalSnapshot == nil ? nil : cursor!.lastDeliveredEventID
                    try Journal.saveCheckpoint(of: listener.configuration.name, confirmed, lastEventID: lastEventID, on: connection)
                    cursor!.checkpointSaved(confirmed)
                    listener.logger.debug("checkpoint", metadata: ["snapshot": "\(confirmed)"])
                }
            }
        }

        /// Reads from the journal the events a notification referred to: one
        /// too large to notify, or a statement's too many.
        private mutating func read(_ reference: JournalReference, cursor: DeliveryCursor?) throws(PostgresError) {
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
                if admit(id: event.id, transactionID: event.transactionID, cursor: cursor) { admitted.append(event) }
            }
        }

        /// Takes a snapshot and notifies ourselves with it in one statement.
        mutating func sendTick(cursor: inout DeliveryCursor, final: Bool = false) throws(PostgresError) {
            lastTick = .now
            guard final || cursor.needsCheckpoint else { return }
            // The tick arrives in libpq's buffer while this runs; the next drain takes it.
            let result = try connection.execute(
                "SELECT s::text, pg_notify($1, s::text) FROM pg_current_snapshot() AS s",
                parameters: [listener.tickChannel], timeout: listener.configuration.connectTimeout
            )
            guard let text = result.rows.first?[0], let snapshot = TransactionSnapshot(text) else {
                throw PostgresError(.queryFailed, "unexpected snapshot from a tick")
            }
            if final {
                cursor.finalTickSent(snapshot: snapshot)
            } else {
                cursor.tickSent(snapshot: snapshot)
            }
        }
    }
}
