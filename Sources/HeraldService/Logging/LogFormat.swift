/// How log lines are written to standard error.
public enum LogFormat: String, Sendable, CaseIterable {
    /// One JSON object per line.
    case json
    /// `key=value` pairs, as read by many log shippers.
    case logfmt
    /// Aligned text for people; coloured on a terminal.
    case pretty
}
