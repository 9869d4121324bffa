public import HeraldHTTP
public import HeraldRealtime

/// The live console in the browser (`console:`). Off by default: on once the
/// configuration file has a `console:` section.
public struct ConsoleConfiguration: Sendable, Equatable {
    /// `console.listen`: where the console also listens on TCP, such as
    /// `127.0.0.1:8080`. Default: nowhere; the Unix socket serves `/console` either way.
    public var listen: ListenAddress?
    /// `console.key` or `console.key_file`: a key that sees every table and
    /// may use the console's controls. `realtime.keys` also open the console
    /// on TCP, each seeing what its grant covers, without the controls.
    public var key: RealtimeCredentials.Key?

    public init(listen: ListenAddress? = nil, key: RealtimeCredentials.Key? = nil) {
        self.listen = listen
        self.key = key
    }
}
