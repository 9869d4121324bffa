/// The `stdout` setting: off, or a ``StdoutFormat``.
public enum StdoutChoice: String, Sendable, CaseIterable {
    case none, json, pretty

    /// What to print in; nil for none.
    public var format: StdoutFormat? { StdoutFormat(rawValue: rawValue) }
}
