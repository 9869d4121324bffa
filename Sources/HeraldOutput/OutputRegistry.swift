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
        var mistakes: [(section: String, error: ConfigurationError)] = []
        let all = settings(from: reader, mistakes: &mistakes)
        if let error = ConfigurationError(all: mistakes.map(\.error)) { throw error }
        return all
    }

    /// Every section that reads, and the mistake of each that does not: one
    /// section's mistake does not hide another's.
    public func settings(from reader: SettingsReader, mistakes: inout [(section: String, error: ConfigurationError)]) -> [String: OutputKind.Settings] {
        var all: [String: OutputKind.Settings] = [:]
        for kind in kinds {
            do {
                if let settings = try kind.settings(from: reader) { all[kind.section] = settings }
            } catch {
                mistakes.append((kind.section, error))
            }
        }
        return all
    }

    /// Keys a reload applies, over every kind.
    public var reloadableKeys: [String] { kinds.flatMap(\.reloadableKeys) }
}
