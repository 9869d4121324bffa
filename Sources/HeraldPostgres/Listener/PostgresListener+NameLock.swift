import Foundation

extension PostgresListener {
    /// Claims this daemon's `--name` for the life of `connection`.
    ///
    /// Two daemons under one name would each move the other's checkpoint, so
    /// the second one is refused with the first one's host and pid. The claim
    /// is a session advisory lock: PostgreSQL releases it when the holder's
    /// connection ends, so a killed daemon never blocks its successor.
    func claimName(on connection: LibpqConnection) throws(LibpqError) {
        let name = configuration.name
        var claimed = try tryLock(name, on: connection)
        if !claimed, let stale = try ownStaleSession(holding: name, on: connection) {
            // Our own session from before a network break, which the server has not noticed yet.
            logger.info("ending this daemon's previous server session, which still holds its name", metadata: ["backend_pid": "\(stale)"])
            try connection.execute("SELECT pg_terminate_backend($1)", parameters: [stale])
            claimed = try waitForRelease(of: name, on: connection)
        } else if !claimed, try holderHasExited(name, on: connection) {
            // A daemon on this host that has just exited (a restart, a refused start): the server
            // ends its session a moment after the process, and releases the name then.
            claimed = try waitForRelease(of: name, on: connection)
        }
        guard claimed else {
            throw LibpqError(
                .nameInUse,
                "another pgherald serve runs under --name \(name) on this database (\(try holder(of: name, on: connection))); "
                    + "stop it, or give this one another --name"
            )
        }
        // Older installations lack the table; the lock alone still protects them.
        guard try daemonTableExists(on: connection) else { return }
        try connection.execute("""
            INSERT INTO pgherald.daemon (name, host, pid, backend_pid) VALUES ($1, $2, $3, pg_backend_pid())
            ON CONFLICT (name) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid, backend_pid = EXCLUDED.backend_pid, since = now()
            """, parameters: [name, ProcessInfo.processInfo.hostName, String(getpid())])
    }

    private func daemonTableExists(on connection: LibpqConnection) throws(LibpqError) -> Bool {
        try connection.execute("SELECT to_regclass('pgherald.daemon') IS NOT NULL").scalar == "t"
    }

    private func tryLock(_ name: String, on connection: LibpqConnection) throws(LibpqError) -> Bool {
        try connection.execute(
            "SELECT pg_try_advisory_lock(hashtext('pgherald.daemon'), hashtext($1))", parameters: [name]
        ).scalar == "t"
    }

    /// The backend of a session that this very process opened earlier and that still holds `name`.
    private func ownStaleSession(holding name: String, on connection: LibpqConnection) throws(LibpqError) -> String? {
        guard try daemonTableExists(on: connection) else { return nil }
        return try connection.execute("""
            SELECT backend_pid FROM pgherald.daemon
             WHERE name = $1 AND host = $2 AND pid = $3 AND backend_pid <> pg_backend_pid()
            """, parameters: [name, ProcessInfo.processInfo.hostName, String(getpid())]).scalar ?? nil
    }

    /// Tries the lock every 100 ms for up to 5 s.
    private func waitForRelease(of name: String, on connection: LibpqConnection) throws(LibpqError) -> Bool {
        for _ in 0..<50 {
            try connection.execute("SELECT pg_sleep(0.1)")
            if try tryLock(name, on: connection) { return true }
        }
        return false
    }

    /// Whether the process recorded as holding `name` ran on this host and is gone.
    private func holderHasExited(_ name: String, on connection: LibpqConnection) throws(LibpqError) -> Bool {
        guard try daemonTableExists(on: connection),
              let recorded = try connection.execute(
                  "SELECT pid FROM pgherald.daemon WHERE name = $1 AND host = $2", parameters: [name, ProcessInfo.processInfo.hostName]
              ).scalar ?? nil,
              let pid = Int32(recorded) else { return false }
        return kill(pid, 0) == -1 && errno == ESRCH
    }

    /// Describes the process holding `name`: its host and pid when recorded, else its server session.
    private func holder(of name: String, on connection: LibpqConnection) throws(LibpqError) -> String {
        let holder = try connection.execute("""
            SELECT l.pid, coalesce(host(a.client_addr), 'local socket') AS client, a.backend_start
              FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
             WHERE l.locktype = 'advisory' AND l.granted
               AND l.classid = hashtext('pgherald.daemon')::oid AND l.objid = hashtext($1)::oid AND l.objsubid = 2
            """, parameters: [name])
        guard let row = holder.namedRows.first, let backend = try row.text("pid") else { return "it has just stopped" }
        if try daemonTableExists(on: connection),
           let recorded = try connection.execute(
               "SELECT host, pid, since FROM pgherald.daemon WHERE name = $1 AND backend_pid = $2", parameters: [name, backend]
           ).namedRows.first {
            return "host \(try recorded.text("host") ?? "?"), pid \(try recorded.text("pid") ?? "?"), since \(try recorded.text("since") ?? "?")"
        }
        return "server session \(backend) from \(try row.text("client") ?? "?"), since \(try row.text("backend_start") ?? "?")"
    }
}
