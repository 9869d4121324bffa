#if canImport(Glibc)
import Glibc
import HeraldConsole
import HeraldHTTP
import HeraldPostgres
public import HeraldSettings
#endif

extension SocketConfiguration {
    /// The `socket:` section; nil with `socket.enabled: false`.
    public static func read(from settings: SettingsReader) throws(ConfigurationError) -> SocketConfiguration? {
        let enabled = try settings.bool("socket.enabled", default: true)
        let path = settings.string("socket.path", default: defaultPath(environment: settings.sources.environment))
        let modeText = settings.string("socket.mode", default: "660")
        guard let mode = mode_t(modeText, radix: 8), mode <= 0o777 else {
            throw settings.fail("socket.mode", "'\(modeText)' is not octal permissions such as 660")
        }
        guard mode & 0o600 == 0o600 else { throw settings.fail("socket.mode", "must let the owner read and write (at least 600)") }
        let group = settings.string("socket.group")
        if let group, getgrnam(group) == nil { throw settings.fail("socket.group", "no group named '\(group)'") }
        let maximum = try settings.int("socket.max_subscribers", default: 10_000, in: 1...Int.max)
        let defaults = StreamShares()
        let shares = StreamShares(
            perKey: try settings.int("socket.max_subscribers_per_key", default: defaults.perKey, in: 0...Int.max),
            perUser: try settings.int("socket.max_subscribers_per_user", default: defaults.perUser, in: 0...Int.max),
            perAddress: try settings.int("socket.max_subscribers_per_address", default: defaults.perAddress, in: 0...Int.max),
            conditionsPerKey: try settings.int("socket.max_conditions_per_key", default: defaults.conditionsPerKey, in: 0...Int.max),
            conditionsPerUser: try settings.int("socket.max_conditions_per_user", default: defaults.conditionsPerUser, in: 0...Int.max),
            conditionsPerAddress: try settings.int("socket.max_conditions_per_address", default: defaults.conditionsPerAddress, in: 0...Int.max)
        )
        let connections = try settings.int("socket.max_connections", default: maximum + 128, in: 1...Int.max)
        let idleTimeout = try settings.value("socket.idle_timeout", default: "10s" as HumanDuration, expected: "a duration such as 10s")
        let buffer = try settings.int("socket.subscriber_buffer", default: 4096, in: PostgresListener.maximumBatch...Int.max)
        let bufferBytes = try settings.int("socket.subscriber_buffer_bytes", default: 16 << 20, in: (1 << 20)...Int.max)
        let heartbeat = try settings.value("socket.heartbeat_interval", default: "15s" as HumanDuration, expected: "a duration such as 15s")
        let writeRate = try settings.int("socket.write_rate", default: 0, in: 0...Int.max)
        let console = try ConsoleConfiguration.read(from: settings)
        let network = try NetworkConfiguration.read(from: settings)
        guard enabled else {
            if console != nil { throw settings.fail("console", "the console is served by the socket, and socket.enabled is false") }
            if network != nil { throw settings.fail("http.listen", "the network listener serves the socket's API, and socket.enabled is false") }
            return nil
        }
        return SocketConfiguration(
            path: path, mode: mode, group: group, maximumSubscribers: maximum, streamShares: shares, maximumConnections: connections,
            idleTimeout: idleTimeout.duration, mailboxCapacity: buffer, mailboxBytes: bufferBytes,
            heartbeatInterval: heartbeat.duration, writeRate: writeRate == 0 ? nil : writeRate, console: console,
            network: network
        )
    }
}
