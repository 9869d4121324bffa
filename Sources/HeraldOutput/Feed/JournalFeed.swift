public import Herald
public import HeraldPostgres
import Synchronization

/// A durable output's way through the journal, with a cursor of its own in
/// `pgherald.output_cursor`, under the daemon's name and the output's.
///
/// The output takes a batch with ``next(limit:waiting:)``, delivers it, and
/// then ``commit(_:)``s it, which moves the cursor past it; one batch at a
/// time. Nothing is skipped: after a crash, a restart or a lost connection
/// reading resumes after the last committed batch, so a batch delivered but
/// not committed (the process was killed in between) is delivered again,
/// with the same event ids. Events come in delivery order (``JournalRange``):
/// transaction by transaction, two that wrote the same row in the order they
/// committed, and within one in the order they were written.
///
/// It reads only what the listener has already delivered to the broker
/// (``PostgresListener/deliveredSnapshot``), so its events carry the change
/// counts the broker gave them, as a live output's do; those that an earlier
/// run delivered, or that the broker's history no longer holds, carry 0.
///
/// The cursor starts, on the output's first run, at what commits from then
/// on. Journal pruning keeps what it has not passed while it is in use
/// (moved or marked within the retention); a cursor left longer than that
/// keeps nothing, as a webhook feed does.
public final class JournalFeed: Sendable {
    /// Events read past the cursor, and where the cursor stands after them.
    public struct Batch: Sendable {
        public var events: [Event]
        fileprivate var position: FeedPosition
        /// The id of the last event read, which ``JournalFeed/lastEventID`` becomes on commit.
        public var lastEventID: UInt64?
    }

    /// How long a reading round waits for a broker event before it looks anyway.
    static let idleInterval: Duration = .seconds(1)
    /// Time between marks of a cursor that is not moving, so that pruning keeps what it has not read.
    static let markInterval: Duration = .seconds(10)

    public let output: String
    public let daemon: String
    let connection: SerialConnection
    let broker: Broker
    let listener: PostgresListener
    let doorbell = Doorbell()
    private let state = Mutex(State())

    private struct State {
        var position: FeedPosition?
        var lastEventID: UInt64?
        var markedAt: ContinuousClock.Instant?
        var stopped = false
        /// The broker's change count that the output has caught up with: its last delivered event's, or the
        /// count when a read found nothing left.
        var caughtUpWithCount: UInt64 = 0
        /// The ranges being read, whose lists of transactions later reads use again.
        var ranges = JournalRanges()
    }

    init(output: String, daemon: String, connection: ConnectionString, broker: Broker, listener: PostgresListener) {
        self.output = output
        self.daemon = daemon
        self.connection = SerialConnection(connection, applicationName: "pgherald-\(output)")
        self.broker = broker
        self.listener = listener
    }

    /// The last event the output committed, when it has committed any.
    public var lastEventID: UInt64? { state.withLock { $0.lastEventID } }

    /// Events the broker has published since the output last caught up, as
    /// last measured: at its last commit, or when a read found nothing left.
    public var backlog: Int {
        let published = broker.statistics.changeCount
        let caughtUp = state.withLock { $0.caughtUpWithCount }
        return Int(published > caughtUp ? published - caughtUp : 0)
    }

    /// Loads the cursor, or starts it at what commits from now on, once the
    /// listener has connected: its first connection claims the daemon's
    /// name, and a second daemon under a taken name must not read or move
    /// the cursors of the first.
    /// - Throws: when the database cannot be reached, or has no `pgherald.output_cursor` (run `pgherald install`);
    ///   ``LibpqError/Code/stopped`` when the listener stopped before it connected.
    public func open() async throws(LibpqError) {
        guard await listener.health.waitUntilConnected() else {
            throw LibpqError(.stopped, "the listener stopped before it connected; the cursor of \(output) was not opened")
        }
        let (position, lastEventID) = try await connection.run { [daemon, output] connection throws(LibpqError) in
            let installed = try connection.execute("SELECT to_regclass('pgherald.output_cursor') IS NOT NULL").scalar == "t"
            guard installed else {
                throw LibpqError(.queryFailed, "the database has no pgherald.output_cursor, which durable outputs keep their place in; run `pgherald install` to add it")
            }
            try connection.execute("""
                INSERT INTO pgherald.output_cursor (daemon, output, snapshot) VALUES ($1, $2, pg_current_snapshot())
                ON CONFLICT (daemon, output) DO NOTHING
                """, parameters: [daemon, output])
            let row = try connection.execute("""
                SELECT snapshot::text, target::text, after_txid::text, after_id::text, last_event_id::text
                  FROM pgherald.output_cursor WHERE daemon = $1 AND output = $2
                """, parameters: [daemon, output]).namedRows.first
            guard let row else {
                throw LibpqError(.queryFailed, "the cursor of \(output) under \(daemon) cannot be read")
            }
            return (try FeedPosition(row: row), try row.optional("last_event_id", as: UInt64.self))
        }
        // Only an opened feed follows the listener: it asks for live deliveries to be confirmed soon after.
        if state.withLock({ $0.position == nil }) { listener.onDelivered { [doorbell] in doorbell.ring() } }
        state.withLock { state in
            state.position = position
            state.lastEventID = lastEventID
            state.markedAt = .now
        }
    }

    /// Rings the feed on each batch the broker delivers, so that a waiting
    /// ``next(limit:waiting:)`` reads at once; until cancelled. The broker
    /// lists it among its subscribers as `kind`.
    public func ringOnEvents(kind: String) async {
        while !Task.isCancelled {
            let subscription = broker.subscribe(kind: kind)
            do {
                while true {
                    let batch = try await subscription.nextBatch(limit: 65_536)
                    if batch.isEmpty { return }
                    doorbell.ring()
                }
            } catch {
                // Fell behind: only rings are lost, and the reading round looks at the journal anyway.
                doorbell.ring()
            }
        }
    }

    /// The next events past the cursor, from up to `limit` journal rows (a
    /// row may hold a statement's batch of events).
    /// - Parameter waiting: wait until there are events (or the task is
    ///   cancelled, which returns an empty batch); false returns at once.
    public func next(limit: Int, waiting: Bool = true) async throws(LibpqError) -> Batch {
        while true {
            guard let start = state.withLock({ $0.position }) else {
                throw LibpqError(.queryFailed, "the cursor of \(output) was read before it was opened")
            }
            // Taken before the read: what the broker published by now is what an empty read caught up with.
            let publishedBefore = broker.statistics.changeCount
            // Nothing is read before the listener's first sweep.
            var batch = Batch(events: [], position: start)
            if let delivered = listener.deliveredSnapshot {
                batch = try await read(after: start, upTo: delivered, limit: limit)
            }
            if !batch.events.isEmpty {
                batch.events = broker.stampedAsDelivered(batch.events)
                return batch
            }
            // Only empty ranges were passed: a crash before the next commit reads them again, and finds them empty again.
            let stopped = state.withLock { state in
                state.position = batch.position
                if listener.deliveredSnapshot != nil { state.caughtUpWithCount = max(state.caughtUpWithCount, publishedBefore) }
                return state.stopped
            }
            guard waiting, !stopped, !Task.isCancelled else { return batch }
            await doorbell.wait(timeout: Self.idleInterval)
            if Task.isCancelled { return batch }
        }
    }

    /// The events of up to `limit` journal rows past `start` whose transactions `now` shows.
    private func read(after start: FeedPosition, upTo now: TransactionSnapshot, limit: Int) async throws(LibpqError) -> Batch {
        let open = state.withLock { $0.ranges }
        let (batch, ranges) = try await connection.run { connection throws(LibpqError) -> (Batch, JournalRanges) in
            var position = start
            var events: [Event] = []
            var lastEventID: UInt64?
            var rowsLeft = limit
            var ranges = open
            while rowsLeft > 0, let range = position.nextRange(now: now) {
                let page = try ranges.page(of: range, limit: rowsLeft, on: connection)
                rowsLeft -= max(page.rows.count, 1)
                for row in page.rows {
                    if let event = try? Event(payload: row.event) { events.append(event) }
                    lastEventID = row.id
                }
                position.fed(through: page.rows.last.map { FeedPosition.Row(transactionID: $0.transactionID, id: $0.id) }, rangeDone: page.isLast)
            }
            ranges.endRound()
            return (Batch(events: events, position: position, lastEventID: lastEventID), ranges)
        }
        state.withLock { $0.ranges = ranges }
        return batch
    }

    /// Moves the cursor past `batch`, which the output has delivered.
    public func commit(_ batch: Batch) async throws(LibpqError) {
        let lastEventID = batch.lastEventID ?? self.lastEventID
        let position = batch.position
        try await connection.run { [daemon, output] connection throws(LibpqError) in
            try connection.execute("""
                UPDATE pgherald.output_cursor
                   SET snapshot = $3::pg_snapshot, target = $4::pg_snapshot, after_txid = $5::xid8, after_id = $6,
                       last_event_id = $7, moved_at = now()
                 WHERE daemon = $1 AND output = $2
                """, parameters: [
                    daemon, output, position.snapshot.description, position.target?.description,
                    position.after.map { String($0.transactionID) }, position.after.map { String($0.id) }, lastEventID.map(String.init),
                ])
        }
        state.withLock { state in
            state.position = position
            state.lastEventID = lastEventID
            state.markedAt = .now
            state.caughtUpWithCount = max(state.caughtUpWithCount, batch.events.last?.count ?? 0)
        }
    }

    /// For a graceful stop: a wait in ``next(limit:waiting:)`` reads once
    /// more and returns, and later calls return at once when nothing is there.
    public func stopWaiting() {
        state.withLock { $0.stopped = true }
        doorbell.ring()
    }

    /// Marks the cursor in use while it cannot move (the output's target is
    /// failing), so that pruning keeps what it has not read; at most every ten seconds.
    public func markInUse() async {
        let due = state.withLock { state in
            guard let marked = state.markedAt, ContinuousClock.now - marked < Self.markInterval else {
                state.markedAt = .now
                return true
            }
            return false
        }
        guard due else { return }
        _ = try? await connection.run { [daemon, output] connection throws(LibpqError) in
            try connection.execute(
                "UPDATE pgherald.output_cursor SET moved_at = now() WHERE daemon = $1 AND output = $2",
                parameters: [daemon, output]
            )
        }
    }
}
