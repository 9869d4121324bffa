import Herald
import Logging

extension PostgresListener {
    /// Journal rows read per query while sweeping (a batch row holds up to 100 events).
    static let catchUpPageSize = 256

    /// Decides the durability on the first connection and, in durable mode,
    /// loads this daemon's checkpoint.
    /// - Returns: the delivery cursor in durable mode, `nil` in notify-only mode.
    func prepareDurability(on connection: LibpqConnection) throws(LibpqError) -> DeliveryCursor? {
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
            throw LibpqError(
                .incompatibleInstall,
                "the database is installed \(installed.map { "for \($0.rawValue)" } ?? "without the publisher"), "
                    + "but --durability \(wanted.rawValue) was asked for; run pgherald install --durability \(wanted.rawValue), "
                    + "or leave --durability out to follow the installation"
            )
        case (let wanted?, _):
            durability = wanted
        }
        if installed != nil, let version = try Journal.publisherVersion(on: connection), version < Journal.requiredPublisherVersion {
            throw LibpqError(
                .incompatibleInstall,
                "the pgherald publisher in this database is version \(version), and this pgherald reads version "
                    + "\(Journal.requiredPublisherVersion): run pgherald install --db '\(connection.endpointDescription)' "
                    + "(the same --db as serve; it upgrades in place and keeps the journal), then start serve again"
            )
        }
        health.recordDurability(durability)
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

    /// Before a graceful stop: delivers what was committed and records a
    /// checkpoint that covers exactly what was delivered.
    func finalCheckpoint(receiver: inout Receiver, cursor: inout DeliveryCursor) {
        receiver.connection.ignoreWakeSignal()
        do throws(LibpqError) {
            // The stop may have come during a sweep.
            try receiver.connection.discardInterruptedQuery(until: .now + .seconds(5))
            try receiver.finish(cursor: &cursor)
            logger.info("recorded the final checkpoint", metadata: ["last_event_id": "\(cursor.lastDeliveredEventID.map(String.init) ?? "none")"])
        } catch {
            logger.warning("could not record the final checkpoint; the next start may deliver some events again", metadata: [
                "error": "\(error)",
            ])
        }
    }
}
