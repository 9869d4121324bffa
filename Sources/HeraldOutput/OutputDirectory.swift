import Synchronization

/// The outputs built so far, in registry order: what `/stats` and
/// `/metrics` report on, and how one output finds another it serves (the
/// socket finds the Supabase endpoint).
public final class OutputDirectory: Sendable {
    private let outputs = Mutex<[any Output]>([])

    public init() {}

    public func add(_ output: any Output) {
        outputs.withLock { $0.append(output) }
    }

    public var all: [any Output] { outputs.withLock { $0 } }

    /// The first output of this type, if one was built.
    public func first<Kind: Output>(_ type: Kind.Type) -> Kind? {
        outputs.withLock { $0.lazy.compactMap { $0 as? Kind }.first }
    }

    /// The sections of the outputs not yet ready (``Output/waitUntilReady()``),
    /// for which `/healthz` answers 503.
    public var starting: [String] {
        all.filter { !$0.isReady }.map { type(of: $0).section }
    }

    /// Every output's report, by section.
    public var reports: [String: OutputReport] {
        Dictionary(all.map { (type(of: $0).section, $0.report) }, uniquingKeysWith: { first, _ in first })
    }
}
