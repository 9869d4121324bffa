public import Herald
public import HeraldOutput
public import HeraldPostgres
public import Logging
public import ServiceLifecycle

/// Readiness, status and the watchdog for systemd (`Type=notify`).
///
/// `READY=1` goes out once the event source is listening, which for the
/// journal's listener is after its catch-up has been handed to the broker, and every output is ready
/// (the socket accepts connections, the webhook feeds and durable cursors
/// have their places): when `systemctl start` returns, events flow to all of them.
/// `WATCHDOG=1` goes out only while the event source shows progress
/// (``SourceHealth/timeSinceProgress`` under the stall limit) and the broker
/// answers, so a wedged daemon is restarted.
public final class SystemdService: Service, Sendable {
    /// Watchdog and status settings.
    public struct Configuration: Sendable {
        /// Half of `WATCHDOG_USEC`; nil sends no pings.
        public var watchdogInterval: Duration?
        /// The event source counts as wedged once it has shown no progress for this long.
        /// Default: the connect timeout plus 5 s, the longest it waits when healthy.
        public var stallLimit: Duration
        /// How often `STATUS=` is refreshed. Default 5 s.
        public var statusInterval: Duration

        public init(watchdogInterval: Duration?, stallLimit: Duration, statusInterval: Duration = .seconds(5)) {
            self.watchdogInterval = watchdogInterval
            self.stallLimit = stallLimit
            self.statusInterval = statusInterval
        }
    }

    public let configuration: Configuration
    let notifier: SystemdNotifier
    let health: SourceHealth
    let broker: Broker
    let outputs: OutputDirectory
    let logger: Logger

    public init(configuration: Configuration, notifier: SystemdNotifier, health: SourceHealth, broker: Broker, outputs: OutputDirectory, logger: Logger) {
        self.configuration = configuration
        self.notifier = notifier
        self.health = health
        self.broker = broker
        self.outputs = outputs
        self.logger = logger
    }

    public func run() async throws {
        var ready = await health.waitUntilListening()
        for output in outputs.all where ready {
            ready = await output.waitUntilReady()
        }
        guard ready else {
            // The group is ending on the listener's or an output's error; ending first would start a shutdown that hides it.
            try? await gracefulShutdown()
            return
        }
        notifier.send("READY=1\nSTATUS=\(status())")
        logger.debug("told systemd the daemon is ready")
        await cancelWhenGracefulShutdown {
            await self.reportUntilCancelled()
        }
        notifier.send("STOPPING=1\nSTATUS=stopping")
    }

    private func reportUntilCancelled() async {
        let tick = min(configuration.watchdogInterval ?? configuration.statusInterval, configuration.statusInterval)
        var lastStatus = ""
        var lastPing = ContinuousClock.now - .seconds(3600)
        var wasHealthy = true
        while !Task.isCancelled {
            var message: [String] = []
            let status = status()
            if status != lastStatus {
                message.append("STATUS=\(status)")
                lastStatus = status
            }
            if let interval = configuration.watchdogInterval, ContinuousClock.now - lastPing >= interval {
                let stalled = health.timeSinceProgress
                let healthy = stalled < configuration.stallLimit
                if healthy {
                    message.append("WATCHDOG=1")
                    lastPing = .now
                } else if wasHealthy {
                    logger.critical("the event source has made no progress; withholding the watchdog ping so systemd restarts the daemon", metadata: [
                        "stalled_for": "\(stalled.secondsText)",
                    ])
                }
                wasHealthy = healthy
            }
            if !message.isEmpty { notifier.send(message.joined(separator: "\n")) }
            do {
                try await Task.sleep(for: tick)
            } catch {
                return
            }
        }
    }

    /// A line for `systemctl status`. Reading the broker's statistics takes
    /// its lock, so a deadlocked broker stops this loop and the pings with it.
    func status() -> String {
        let statistics = broker.statistics
        let listenerState = switch health.status {
        case .reconnecting(let attempt, let error): "reconnecting (attempt \(attempt): \(error.prefix(120)))"
        default: health.status.name
        }
        let subscribers = statistics.subscribersByKind.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
        return "\(listenerState); \(statistics.changeCount) changes; subscribers: \(subscribers.isEmpty ? "none" : subscribers.joined(separator: ", "))"
    }
}
