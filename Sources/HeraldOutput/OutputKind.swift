public import HeraldSettings
public import Logging

/// One kind of output as the registry holds it: its type, with the
/// configuration it reads kept opaque so that every kind fits in one list.
public struct OutputKind: Sendable {
    /// A section as one kind read it, for building the output and for reloads.
    public struct Settings: Sendable {
        fileprivate let value: any Sendable
        fileprivate let isEqual: @Sendable (any Sendable) -> Bool

        /// Whether `other` holds the same settings.
        public func same(as other: Settings) -> Bool { isEqual(other.value) }

        /// The settings as the kind's own configuration type.
        public func `as`<Configuration>(_ type: Configuration.Type) -> Configuration? { value as? Configuration }
    }

    public let section: String
    public let reloadableKeys: [String]
    /// Makes the logger its ``OutputContext`` carries, once logging is set up.
    public let makeLogger: @Sendable () -> Logger
    let read: @Sendable (SettingsReader) throws(ConfigurationError) -> Settings?
    let build: @Sendable (Settings, OutputContext) throws -> any Output
    let reload: @Sendable (any Output, Settings) async -> Void

    /// Registers `output`, which logs through `logger`.
    public init<Kind: Output>(_ output: Kind.Type, logger: @escaping @autoclosure @Sendable () -> Logger) {
        makeLogger = logger
        section = Kind.section
        reloadableKeys = Kind.reloadableKeys
        read = { settings throws(ConfigurationError) in
            try Kind.configuration(from: settings).map { configuration in
                Settings(value: configuration, isEqual: { ($0 as? Kind.Configuration) == configuration })
            }
        }
        build = { settings, context in
            guard let configuration = settings.as(Kind.Configuration.self) else {
                preconditionFailure("settings of another kind handed to \(Kind.section)")
            }
            return try Kind(configuration: configuration, context: context)
        }
        reload = { output, settings in
            guard let output = output as? Kind, let configuration = settings.as(Kind.Configuration.self) else { return }
            await output.reload(configuration)
        }
    }

    /// Reads this kind's section; nil when the output is off.
    public func settings(from reader: SettingsReader) throws(ConfigurationError) -> Settings? {
        try read(reader)
    }

    /// Builds the output from settings this kind read.
    public func makeOutput(_ settings: Settings, context: OutputContext) throws -> any Output {
        try build(settings, context)
    }

    /// Hands `output`, of this kind, settings read again.
    public func reload(_ output: any Output, with settings: Settings) async {
        await reload(output, settings)
    }
}
