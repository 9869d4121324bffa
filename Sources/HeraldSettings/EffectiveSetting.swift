/// One setting as it is in force, and where it came from.
public struct EffectiveSetting: Sendable, Hashable {
    public var key: String
    /// Shown as it would be written in the file; secrets as `(secret)`.
    public var value: String
    /// A flag, an environment variable, a file line, or `default`.
    public var source: String
}
