/// Where settings come from, lowest precedence first: a YAML file,
/// `PGHERALD_*` environment variables, then flags.
public struct ConfigurationSources: Sendable {
    /// A flag given on the command line, kept with its name for messages.
    public struct Flag: Sendable {
        public var name: String
        public var value: String

        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The file `serve` reads when no `--config` is given; its absence is no error.
    public static let defaultFile = "/etc/pgherald/pgherald.yaml"

    /// The YAML file, or nil for none.
    public var file: String?
    /// Whether a missing file is an error: true when it was named explicitly.
    public var fileRequired: Bool
    public var environment: [String: String]
    /// Flags given on the command line, by setting key (`socket.max_subscribers`).
    public var flags: [String: Flag]

    public init(file: String?, fileRequired: Bool, environment: [String: String], flags: [String: Flag] = [:]) {
        self.file = file
        self.fileRequired = fileRequired
        self.environment = environment
        self.flags = flags
    }

    /// The environment variable for a key: `socket.max_subscribers` → `PGHERALD_SOCKET_MAX_SUBSCRIBERS`.
    public static func environmentName(of key: String) -> String {
        "PGHERALD_" + key.uppercased().replacing(".", with: "_")
    }
}
