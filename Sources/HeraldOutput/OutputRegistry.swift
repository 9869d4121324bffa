public import HeraldSettings

/// The kinds of output `serve` knows, in the order it builds and starts them.
///
/// Order matters only where one output serves another's routes (the socket
/// serves Supabase clients too), and for shutdown: the group stops services
/// in reverse order, so outputs listed first drain last.
public struct OutputRegistry: Sendable {
    public let kinds: [OutputKind]

    public init(_ kinds: [OutputKind]) {
        self.kinds = kinds
    }

    /// Each kind's settings, by section, for the kinds that are on.
    public func settings(from reader: SettingsReader) throws(ConfigurationError) -> [String: OutputKind.Settings] {
        var all: [String: OutputKind.Settings] = [:]
        for kind in kinds {
            if let settings = try kind.settings(from: reader) { all[kind.section] = settings }
        }
        return all
    }

    /// Keys a reload applies, over every kind.
    public var reloadableKeys: [String] { kinds.flatMap(\.reloadableKeys) }
}
