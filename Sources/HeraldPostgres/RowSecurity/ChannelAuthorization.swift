import Foundation
public import Herald

/// What a user may do on a private Supabase channel, as Supabase's Realtime
/// Authorization decides it: from the row-level security policies on
/// `realtime.messages`, with `realtime.topic()` the channel's topic and
/// `extension` `broadcast` or `presence`. SELECT of `broadcast` lets the
/// user join and receive; INSERT lets it send broadcasts (`broadcast`) and
/// track its presence (`presence`).
public struct ChannelAuthorization: Sendable, Hashable {
    public var readsBroadcast = false
    public var readsPresence = false
    public var writesBroadcast = false
    public var writesPresence = false

    public init(readsBroadcast: Bool = false, readsPresence: Bool = false, writesBroadcast: Bool = false, writesPresence: Bool = false) {
        self.readsBroadcast = readsBroadcast
        self.readsPresence = readsPresence
        self.writesBroadcast = writesBroadcast
        self.writesPresence = writesPresence
    }

    /// Why a user who may not join is refused, in Supabase's words.
    public static func readRefusal(topic: String) -> String {
        "You do not have permissions to read from this Channel topic: \(topic)"
    }

    /// Whether the user may join: it reads the channel's broadcasts. A
    /// channel carries broadcasts and presence alike, so reading presence
    /// alone is not enough.
    public var mayJoin: Bool { readsBroadcast }

    /// The permissions of `identity` on `topic`, asked the way Supabase asks:
    /// messages inserted and read back in transactions that are rolled back,
    /// so that nothing is written; on a read replica, which takes no
    /// insert, by the policies' expressions (``checkWithoutWriting(topic:as:on:)``).
    /// Nil where the database has no `realtime.messages`: the `topics:` grants decide there.
    static func check(topic: String, as identity: RowSecurityIdentity, on connection: LibpqConnection) throws(LibpqError) -> ChannelAuthorization? {
        let state = try connection.execute(
            "SELECT to_regclass('realtime.messages') IS NOT NULL AND to_regprocedure('realtime.topic()') IS NOT NULL, pg_is_in_recovery()"
        )
        guard state.rows.first?.first == "t" else { return nil }
        if state.rows.first?.last == "t" { return try checkWithoutWriting(topic: topic, as: identity, on: connection) }
        let marker = "pgherald.authorization.\(UUID().uuidString.lowercased())"
        let (topicText, markerText) = (try connection.escapeLiteral(topic), try connection.escapeLiteral(marker))
        let becoming = try identity.becoming(on: connection) + "SELECT set_config('realtime.topic', \(topicText), true);\n"
        func insert(_ kind: String) -> String {
            "INSERT INTO realtime.messages (topic, extension, private, event, payload) VALUES (\(topicText), '\(kind)', true, \(markerText), '{}')"
        }
        // Read: the messages pgherald wrote as itself, as the user sees them.
        let (read, readError) = try connection.executeScript("""
            BEGIN;
            SET LOCAL statement_timeout = '5s';
            \(insert("broadcast"));
            \(insert("presence"));
            \(becoming)
            SELECT coalesce(string_agg(extension, ','), '') FROM realtime.messages WHERE event = \(markerText) AND topic = \(topicText);
            ROLLBACK
            """)
        if let readError {
            try connection.execute("ROLLBACK")
            throw readError
        }
        let readable = Set((read.last { !$0.rows.isEmpty }?.rows.first?.first ?? nil)?.split(separator: ",").map(String.init) ?? [])
        var authorization = ChannelAuthorization(readsBroadcast: readable.contains("broadcast"), readsPresence: readable.contains("presence"))
        // Write: the user's own insert, which its policies' WITH CHECK admits or refuses.
        for kind in ["broadcast", "presence"] {
            let (_, writeError) = try connection.executeScript("BEGIN; SET LOCAL statement_timeout = '5s'; \(becoming) \(insert(kind)); ROLLBACK")
            if let writeError {
                try connection.execute("ROLLBACK")
                // 42501: a policy (or a privilege) refused the row; anything else is a failure to report.
                guard writeError.sqlState == "42501" else { throw writeError }
                continue
            }
            if kind == "broadcast" { authorization.writesBroadcast = true } else { authorization.writesPresence = true }
        }
        return authorization
    }
}

extension RowSecurityGate {
    /// What `identity` may do on the private channel `topic`, from the
    /// policies on `realtime.messages`; nil where the database has none.
    /// - Throws: ``RowSecurityError`` when the check itself fails (a policy raised, the role cannot be set).
    public func authorize(topic: String, as identity: RowSecurityIdentity) async throws(RowSecurityError) -> ChannelAuthorization? {
        do {
            return try await connection.run { connection throws(LibpqError) in
                try ChannelAuthorization.check(topic: topic, as: identity, on: connection)
            }
        } catch {
            throw RowSecurityError(reason: error.message)
        }
    }
}
