import Herald
import Logging

extension PostgresListener {
    /// Journal rows read per query while catching up (a batch row holds up to 100 events).
    static let catchUpPageSize = 256

    /// Decides the durability on the first connection and, in durable mode,
    /// loads this daemon's checkpoint.
    /// - Returns: the delivery cursor in durable mode, `nil` in notify-only mode.
    func prepareDurability(on connection: PostgresConnection) throws(PostgresError) -> DeliveryCursor? {
        let installed = try Journal.installedDurability(on: connection)
        let durability: Durability
        switch (configuration.durability, installed) {
        case (nil, nil):
            logger.warning("the pgherald publisher is not installed in this database: no triggers publish changes, only events sent by hand arrive", metadata: [
                "hint": "run pgherald install --db '\(connection.endpointDescription)' (the same --db as serve), then restart serve",
            ])
            durability = .notifyOnly
        case (nil, let installed?):
            durability = installed
        case (.notifyOnly?, nil):
            durability = .notifyOnly
        case (let wanted?, let installed) where wanted != installed:
            throw PostgresError(
                .incompatibleInstall,
                "the database is installed \(installed.map { "for \($0.rawValue)" } ?? "without the publisher"), "
                    + "but --durability \(wanted.rawValue) was asked for; run pgherald install --durability \(wanted.rawValue), "
                    + "or leave --durability out to follow the installation"
            )
        case (let wanted?, _):
            durability = wanted
        }
        if installed != nil, let version = try Journal.publisherVersion(on: connection), version < Journal.requiredPublisherVersion {
            throw PostgresError(
                .incompatibleInstall,
                "the pgherald publisher in this database is version \(version), and this pgherald reads version "
                    + "\(Journal.requiredPublisherVersion): run pgherald install --db '\(connection.endpointDescription)' "
                    + "(the same --db as serve; it upgrades in place and keeps the journal), then start serve again"
            )
        }
        state.withLock { $0.durability = durability }
        guard durability == .durable else { return nil }
        let checkpoint = try Journal.latestCheckpoint(of: configuration.name, on: connection)
        if let lastEventID = checkpoint?.lastEventID {
            broker.historyContinues(afterEventID: String(lastEventID))
        }
        logger.info("durable mode", metadata: [
            "name": "\(configuration.name)",
            "checkpoint": "\(checkpoint.map { "\($0.snapshot)" } ?? "none: starting from now")",
        ])
        return DeliveryCursor(checkpoint: checkpoint?.snapshot)
    }

    /// Delivers, from the journal, every event committed between the
    /// checkpoint and now that has not been delivered, then records the checkpoint.
    ///
    /// Runs after LISTEN: transactions that commit later are notified, and
    /// live events from transactions this catch-up covered are dropped.
    func catchUp(on connection: PostgresConnection, cursor: inout DeliveryCursor) throws(PostgresError) {
        let listenSnapshot = try Journal.currentSnapshot(on: connection)
        if let range = cursor.connected(listenSnapshot: listenSnapshot) {
            var after: (transactionID: UInt64, id: UInt64)?
            var delivered = 0
            var page: Journal.Page
            repeat {
                page = try Journal.events(
                    visibleIn: range.to, notVisibleIn: range.from, after: after,
                    limit: Self.catchUpPageSize, on: connection
                )
                var events: [Event] = []
                for row in page.rows {
                    after = (row.transactionID, row.id)
                    guard cursor.admitCatchUp(id: row.id, transactionID: row.transactionID) else { continue }
                    do {
                        events.append(try Event(payload: row.event))
                    } catch {
                        logger.error("a journal event cannot be read", metadata: ["event_id": "\(row.id)", "reason": "\(error)"])
                    }
                }
                for start in stride(from: 0, to: events.count, by: Self.maximumBatch) {
                    recordLag(of: broker.publish(events[start..<min(start + Self.maximumBatch, events.count)], resumable: false))
                }
                delivered += events.count
            } while !page.isLast
            recordCatchUp(events: delivered)
            logger.info("caught up from the journal", metadata: ["events": "\(delivered)", "from": "\(range.from)", "to": "\(range.to)"])
        }
        if let covered = cursor.caughtUp() {
            try Journal.saveCheckpoint(of: configuration.name, covered, on: connection)
            cursor.checkpointSaved(covered)
        }
    }

    /// Before a graceful stop: records a checkpoint that covers exactly what
    /// was delivered, so the next start neither repeats nor skips an event.
    func finalCheckpoint(on connection: PostgresConnection, receiver: inout Receiver, cursor: inout DeliveryCursor?) {
        connection.ignoreWakeSignal()
        let deadline = ContinuousClock.now + .seconds(5)
        do throws(PostgresError) {
            try receiver.sendTick(cursor: &cursor!, final: true)
            try receiver.drain(cursor: &cursor)
            while cursor!.pendingTick != nil {
                try connection.awaitInput(until: deadline)
                try receiver.drain(cursor: &cursor)
            }
            logger.info("recorded the final checkpoint", metadata: ["last_event_id": "\(cursor!.lastDeliveredEventID.map(String.init) ?? "none")"])
        } catch {
            logger.warning("could not record the final checkpoint; the next start may deliver some events again", metadata: [
                "error": "\(error)",
            ])
        }
    }
}
