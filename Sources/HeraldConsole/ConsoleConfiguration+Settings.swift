import Herald
import HeraldHTTP
import HeraldRealtime
public import HeraldSettings

extension ConsoleConfiguration {
    /// The `console:` section; nil without one, or with `console.enabled: false`.
    public static func read(from settings: SettingsReader) throws(ConfigurationError) -> ConsoleConfiguration? {
        // An empty `console:` turns it on too.
        guard settings.fileContains("console") || !settings.fileKeys(under: "console").isEmpty else { return nil }
        let enabled = try settings.bool("console.enabled", default: true)
        let listenText = settings.string("console.listen")
        var listen: ListenAddress?
        if let listenText {
            guard let address = ListenAddress(listenText) else {
                throw settings.fail("console.listen", "'\(listenText)' is not HOST:PORT, such as 127.0.0.1:8080 or [::1]:8080")
            }
            listen = address
        }
        let key = try consoleKey(settings)
        if listen != nil, key == nil, settings.fileSections(under: "realtime.keys").isEmpty {
            throw settings.fail(
                "console.listen",
                "a console on TCP asks for a key, and none is configured: add console.key_file (such as `openssl rand -hex 24` in a file), or realtime.keys"
            )
        }
        guard enabled else { return nil }
        return ConsoleConfiguration(listen: listen, key: key)
    }

    private static func consoleKey(_ settings: SettingsReader) throws(ConfigurationError) -> RealtimeCredentials.Key? {
        try settings.keySecret(under: "console", minimumLength: 16, what: "the console key").map {
            RealtimeCredentials.Key(name: "console", secret: $0, grant: AccessGrant())
        }
    }
}
