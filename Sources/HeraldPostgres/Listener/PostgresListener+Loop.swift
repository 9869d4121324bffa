import Herald
import Logging

extension PostgresListener {
    /// The listener thread's body. Returns the startup error if the first connection failed.
    func runLoop() -> Result<Void, any Error> {
        var machine = ReconnectStateMachine(backoff: configuration.backoff)
        var connection: LibpqConnection?
        var lastError = LibpqError(.connectionFailed, "not connected")
        // Set at the first connection in durable mode; kept across reconnects.
        var cursor: DeliveryCursor?
        var firstConnection = true
        var action = machine.start()
        defer { health.report(.stopped) }
        while true {
            health.recordProgress()
            switch action {
            case .connect(let attempt):
                if attempt == 0 { health.report(.connecting) }
                do {
                    let opened = try openConnection()
                    if machine.hasListened {
                        recordReconnect()
                    } else {
                        cursor = try namingTheRole(of: opened) { () throws(LibpqError) in try prepareDurability(on: opened) }
                    }
                    connection = opened
                    action = machine.connected()
                } catch where error.code == .stopped {
                    action = machine.stop()
                } catch {
                    lastError = error
                    if machine.hasListened {
                        logger.warning("reconnect failed", metadata: ["attempt": "\(attempt)", "error": "\(error)"])
                    }
                    action = machine.connectFailed(random: Double.random(in: 0..<1))
                }
            case .listen:
                let opened = ContinuousClock.now
                let error = listen(on: connection!, cursor: &cursor, firstConnection: firstConnection)
                firstConnection = false
                connection = nil
                cursor?.disconnected()
                if error.code == .stopped {
                    action = machine.stop()
                } else {
                    lastError = error
                    logger.warning("connection lost", metadata: ["error": "\(error)"])
                    action = machine.connectionLost(heldFor: .now - opened, random: Double.random(in: 0..<1))
                }
            case .waitBeforeReconnect(let delay, let attempt):
                health.report(.reconnecting(attempt: attempt, lastError: lastError.message))
                logger.info("reconnecting", metadata: ["attempt": "\(attempt)", "delay": "\(delay.secondsText)"])
                if waitInSlices(until: .now + delay) == .woken {
                    action = machine.stop()
                } else {
                    action = machine.backoffElapsed()
                }
            case .failStartup:
                return .failure(lastError)
            case .close, .none:
                connection = nil
                logger.info("listener stopped")
                return .success(())
            }
        }
    }

    /// Waits for the backoff a second at a time, recording progress, so a long backoff does not look like a wedge.
    private func waitInSlices(until deadline: ContinuousClock.Instant) -> WakeSignal.WaitResult {
        while true {
            health.recordProgress()
            let slice = min(deadline, .now + Self.idleWake)
            let outcome = wake.wait(until: slice)
            if outcome == .woken || slice == deadline { return outcome }
        }
    }

    /// Connects and subscribes to the install's channel and to this daemon's ticks.
    private func openConnection() throws(LibpqError) -> LibpqConnection {
        let deadline = ContinuousClock.now + configuration.connectTimeout
        let connection = try LibpqConnection.connect(
            configuration.connection,
            timeout: configuration.connectTimeout,
            applicationName: "pgherald",
            wake: wake
        )
        // A connection that swallows traffic without closing must not hold a sweep forever.
        connection.queryTimeout = configuration.connectTimeout
        return try namingTheRole(of: connection) { () throws(LibpqError) in try subscribe(on: connection, deadline: deadline) }
    }

    /// Checks the session's route, LISTENs, and claims the daemon's name.
    private func subscribe(on connection: LibpqConnection, deadline: ContinuousClock.Instant) throws(LibpqError) -> LibpqConnection {
        try checkSessionRoute(of: connection, deadline: deadline)
        let name = try Journal.notificationChannel(on: connection) ?? Self.uninstalledChannel
        state.withLock { $0.channel = name }
        let channel = try connection.escapeIdentifier(name)
        let ticks = try connection.escapeIdentifier(tickChannel)
        // No JIT: the listener's statements read at most a page of the
        // journal by index, in milliseconds, and compiling one first took
        // 15-60 ms wherever the planner's estimate grew with the journal. Set
        // here, as the listener's session is its own (no shared pool), and
        // not as the `options` startup parameter, which poolers refuse.
        try connection.execute(
            "SET jit = off; LISTEN \(channel); LISTEN \(ticks)",
            timeout: ContinuousClock.now.duration(to: deadline)
        )
        try claimName(on: connection)
        logger.info("listening", metadata: [
            "server": "\(connection.endpointDescription)",
            "backend_pid": "\(connection.backendPID)",
        ])
        return connection
    }

    /// Catches up (in durable mode), then receives until the connection fails or the listener is stopped.
    private func listen(on connection: LibpqConnection, cursor: inout DeliveryCursor?, firstConnection: Bool) -> LibpqError {
        var receiver = Receiver(listener: self, connection: connection, durable: cursor != nil, resumable: !firstConnection)
        if cursor != nil {
            health.report(.catchingUp)
            do throws(LibpqError) {
                try receiver.catchUp(cursor: &cursor!)
            } catch {
                return error
            }
        }
        health.report(.listening)
        let error = receiver.run(cursor: &cursor)
        recordParked(false)
        if error.code == .stopped, cursor != nil {
            finalCheckpoint(receiver: &receiver, cursor: &cursor!)
        }
        return error
    }

    /// The most events handed to the broker at once. Subscriber buffers must
    /// hold at least this many, or a fast subscriber could overflow on a
    /// burst it never had the chance to read. Small batches also get the
    /// first events of a burst out sooner.
    public static let maximumBatch = 128

    /// How often the sweeps' statements are planned afresh. The journal's
    /// parts go without autovacuum, and a part grows from empty after an
    /// install or a turn: a plan cached while it was small scans it whole at
    /// every sweep, which cost the backend 80 µs an event at 2,000
    /// single-row commits/s. Replanning costs five plans of 0.4 ms, 0.1 % of
    /// a core every 2 s.
    static let replanInterval: Duration = .seconds(2)

    /// What a listener hears where pgherald is not installed: events sent by hand alone.
    static let uninstalledChannel = "pgherald"

    /// The channel a durable listener notifies itself on to confirm
    /// checkpoints: the install's, so that no other role learns it either.
    var tickChannel: String { "\(state.withLock { $0.channel }).tick" }
}
