#if canImport(Glibc)
import Glibc
#endif
import HeraldConfiguration
import HeraldServer
import HeraldWebhooks
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals

/// Rereads the configuration on SIGHUP and applies what can change while
/// running: log levels and format, stdout's format, the event log's settings
/// (and it reopens the event log, for logrotate), the webhook endpoints
/// (pending deliveries stay in the database throughout) and the access rules
/// (streams whose grant changed are closed with `event: revoked`). The
/// database connection and other streams are untouched. A rejected file
/// leaves the old configuration in force; settings that need a restart say so.
final class ConfigurationReloader: Service, Sendable {
    /// Keys a reload applies; any other key that changes needs a restart.
    static let liveKeys: [String] = ["log.", "stdout", "event_log.sync", "event_log.sync_interval", "event_log.max_size", "event_log.keep", "password_file", "webhooks.", "access", "realtime.keys", "realtime.jwt"]

    let sources: ConfigurationSources
    let current: Mutex<DaemonConfiguration>
    let stdout: StdoutOutput?
    let eventLog: EventLogOutput?
    let webhooks: WebhookService
    let socket: SocketServer?
    let realtime: RealtimeEndpoint
    let notifier: SystemdNotifier
    let logger: Logger

    init(sources: ConfigurationSources, current: DaemonConfiguration, stdout: StdoutOutput?, eventLog: EventLogOutput?, webhooks: WebhookService, socket: SocketServer?, realtime: RealtimeEndpoint, notifier: SystemdNotifier, logger: Logger) {
        self.socket = socket
        self.realtime = realtime
        self.sources = sources
        self.current = Mutex(current)
        self.stdout = stdout
        self.eventLog = eventLog
        self.webhooks = webhooks
        self.notifier = notifier
        self.logger = logger
    }

    func run() async throws {
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        await cancelWhenGracefulShutdown {
            for await _ in hangups {
                await self.reload()
            }
        }
    }

    func reload() async {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        notifier.send("RELOADING=1\nMONOTONIC_USEC=\(Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1000)")
        defer { notifier.send("READY=1") }
        let new: DaemonConfiguration
        do {
            new = try await DaemonConfiguration.load(from: sources)
        } catch {
            logger.error("the new configuration was rejected; the running one stays in force", metadata: [
                "key": "\(error.key)", "source": "\(error.source)", "reason": "\(error.reason)",
            ])
            return
        }
        let old = current.withLock { $0 }
        LoggingSetup.reconfigure(.init(levels: new.logLevels, format: new.logFormat))
        if let stdout, let format = new.stdout { stdout.setFormat(format) }
        if let eventLog {
            await eventLog.reopen(with: new.eventLog)
        }
        if new.webhooks != old.webhooks {
            do {
                try await webhooks.reload(new.webhooks)
                logger.info("applied the webhook endpoints", metadata: ["endpoints": "\(new.webhooks.map(\.name).joined(separator: ","))"])
            } catch {
                logger.error("cannot apply the webhook endpoints; the database is unavailable", metadata: ["error": "\(error)"])
            }
        }
        if new.access != old.access { socket?.apply(access: new.access) }
        if new.realtime.credentials != old.realtime.credentials {
            realtime.apply(credentials: new.realtime.credentials)
            logger.info("applied the realtime keys", metadata: ["keys": "\(new.realtime.credentials.keys.map(\.name).joined(separator: ","))"])
        }
        let before = Dictionary(old.effective.map { ($0.key, $0.value) }) { first, _ in first }
        let needRestart = new.effective.filter { setting in
            before[setting.key] != setting.value && !Self.liveKeys.contains { setting.key.hasPrefix($0) }
        }
        // The event log is only switched on or off by a restart; its path is reopened live.
        for setting in needRestart where !(setting.key == "event_log.path" && eventLog != nil && new.eventLog != nil) {
            logger.warning("a changed setting needs a restart (systemctl restart pgherald)", metadata: [
                "key": "\(setting.key)", "running": "\(before[setting.key] ?? "(none)")", "new": "\(setting.value)",
            ])
        }
        current.withLock { $0 = new }
        logger.info("reloaded the configuration", metadata: ["file": "\(sources.file ?? "none")"])
    }
}
