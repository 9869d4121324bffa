#if canImport(Glibc)
import Glibc
import HeraldAPI
import HeraldConfiguration
import HeraldOutput
import HeraldService
import HeraldSettings
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals
#endif

/// Rereads the configuration on SIGHUP and applies what can change while
/// running: log levels and format, the access rules (streams whose grant
/// changed are closed with `event: revoked`), and each output's own
/// reloadable keys, which every output applies in its `reload` (the event
/// log reopens its file then, for logrotate; webhook endpoints change with
/// their pending deliveries kept in the database). The database connection
/// and other streams are untouched. A rejected file leaves the old
/// configuration in force; settings that need a restart say so.
final class ConfigurationReloader: Service, Sendable {
    /// Keys a reload applies apart from the outputs' own.
    static let daemonKeys: [String] = ["log.", "password_file", "access"]

    let sources: ConfigurationSources
    let current: Mutex<DaemonConfiguration>
    let registry: OutputRegistry
    let outputs: OutputDirectory
    let notifier: SystemdNotifier
    let logger: Logger

    init(sources: ConfigurationSources, current: DaemonConfiguration, registry: OutputRegistry, outputs: OutputDirectory, notifier: SystemdNotifier, logger: Logger) {
        self.sources = sources
        self.current = Mutex(current)
        self.registry = registry
        self.outputs = outputs
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
            new = try await DaemonConfiguration.load(from: sources, registry: registry)
        } catch {
            logger.error("the new configuration was rejected; the running one stays in force", metadata: [
                "key": "\(error.key)", "source": "\(error.source)", "reason": "\(error.reason)",
            ])
            return
        }
        let old = current.withLock { $0 }
        LoggingSetup.reconfigure(.init(levels: new.logLevels, format: new.logFormat))
        var switched: Set<String> = []
        for kind in registry.kinds {
            let running = outputs.all.first { type(of: $0).section == kind.section }
            switch (running, new.outputs[kind.section]) {
            case (let output?, let settings?):
                await kind.reload(output, with: settings)
            case (nil, nil):
                break
            default:
                switched.insert(kind.section)
                logger.warning("an output was switched on or off, which needs a restart (systemctl restart pgherald)", metadata: ["output": "\(kind.section)"])
            }
        }
        if new.access != old.access { outputs.first(SocketServer.self)?.apply(access: new.access) }
        let live = Self.daemonKeys + registry.reloadableKeys
        let before = Dictionary(old.effective.map { ($0.key, $0.value) }) { first, _ in first }
        let needRestart = new.effective.filter { setting in
            before[setting.key] != setting.value && !live.contains { setting.key.hasPrefix($0) }
                && !switched.contains { setting.key.hasPrefix($0) }
        }
        for setting in needRestart {
            logger.warning("a changed setting needs a restart (systemctl restart pgherald)", metadata: [
                "key": "\(setting.key)", "running": "\(before[setting.key] ?? "(none)")", "new": "\(setting.value)",
            ])
        }
        current.withLock { $0 = new }
        logger.info("reloaded the configuration", metadata: ["file": "\(sources.file ?? "none")"])
    }
}
