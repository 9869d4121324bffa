import Herald
import Logging

extension PostgresListener {
    /// The listener thread's body. Returns the startup error if the first connection failed.
    func runLoop() -> Result<Void, any Error> {
        var machine = ReconnectStateMachine(backoff: configuration.backoff)
        var connection: PostgresConnection?
        var lastError = PostgresError(.connectionFailed, "not connected")
        var action = machine.start()
        defer { setStatus(.stopped) }
        while true {
            switch action {
            case .connect(let attempt):
                if attempt == 0 { setStatus(.connecting) }
                do {
                    connection = try openConnection()
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
                setStatus(.listening)
                let error = receive(on: connection!)
                connection = nil
                if error.code == .stopped {
                    action = machine.stop()
                } else {
                    lastError = error
                    logger.warning("connection lost", metadata: ["error": "\(error)"])
                    action = machine.connectionLost(random: Double.random(in: 0..<1))
                }
            case .waitBeforeReconnect(let delay, let attempt):
                setStatus(.reconnecting(attempt: attempt, lastError: lastError.message))
                logger.info("reconnecting", metadata: ["attempt": "\(attempt)", "delay": "\(delay)"])
                if wake.wait(until: .now + delay) == .woken {
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

    /// Connects and subscribes to the channel.
    private func openConnection() throws(PostgresError) -> PostgresConnection {
        let deadline = ContinuousClock.now + configuration.connectTimeout
        let connection = try PostgresConnection.connect(
            configuration.connection,
            timeout: configuration.connectTimeout,
            applicationName: "pgherald",
            wake: wake
        )
        let channel = try connection.escapeIdentifier(configuration.channel)
        try connection.execute("LISTEN \(channel)", timeout: ContinuousClock.now.duration(to: deadline))
        logger.info("listening", metadata: [
            "channel": "\(configuration.channel)",
            "server": "\(connection.endpointDescription)",
            "backend_pid": "\(connection.backendPID)",
        ])
        return connection
    }

    /// Reads, decodes and publishes until the connection fails or the listener is stopped.
    ///
    /// A burst (a large transaction) arrives in many socket reads. Reading on
    /// while input is already waiting lets one publish carry many events, so
    /// subscribers wake once per batch; batches never exceed ``maximumBatch``.
    private func receive(on connection: PostgresConnection) -> PostgresError {
        var batch: [Event] = []
        batch.reserveCapacity(Self.maximumBatch)
        let decode: PostgresConnection.NotificationHandler = { _, payload, senderPID in
            do {
                batch.append(try Event(payload: payload))
            } catch {
                self.logger.warning("skipped a notification that is not a pgherald event", metadata: [
                    "reason": "\(error)",
                    "sender_pid": "\(senderPID)",
                    "payload": "\(String(decoding: payload.prefix(160), as: UTF8.self))",
                ])
            }
        }
        while true {
            do throws(PostgresError) {
                try connection.awaitInput()
                while true {
                    let room = Self.maximumBatch - batch.count
                    if connection.takeNotifications(limit: room, decode) == room {
                        publish(&batch)
                    } else if connection.hasWaitingInput {
                        try connection.readInput()
                    } else {
                        break
                    }
                }
            } catch {
                return error
            }
            publish(&batch)
        }
    }

    private func publish(_ batch: inout [Event]) {
        guard !batch.isEmpty else { return }
        broker.publish(batch)
        batch.removeAll(keepingCapacity: true)
    }

    /// The most events handed to the broker at once. Subscriber buffers must
    /// hold at least this many, or a fast subscriber could overflow on a
    /// burst it never had the chance to read. Small batches also get the
    /// first events of a burst out sooner.
    public static let maximumBatch = 128
}
